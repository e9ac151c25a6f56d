import { z } from "zod";

/** The topic object as zod: serializeTopic is typed by it and the OpenAPI document publishes it. */
export const topicObjectSchema = z
  .object({
    id: z.string(),
    hub_id: z.string(),
    owner_id: z.string(),
    parent_id: z.string().nullable(),
    name: z.string(),
    description: z.string(),
    icon: z.string(),
    position: z.int(),
    pinned: z.boolean(),
    user_modified: z.boolean(),
    memory_count: z.int(),
    created_by: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    archived_at: z.string().optional().meta({ description: "Present only on archived topics" }),
  })
  .meta({ id: "Topic" });
export type TopicObject = z.output<typeof topicObjectSchema>;

/** A topic with its branch total (GET /v1/topics/{id}). */
export const topicWithTotalSchema = topicObjectSchema.extend({ total_memory_count: z.int() }).meta({ id: "TopicWithTotal" });

/** A node of GET /v1/topics' tree. */
export interface TopicNode extends z.output<typeof topicWithTotalSchema> {
  children: TopicNode[];
}
export const topicNodeSchema: z.ZodType<TopicNode> = topicWithTotalSchema
  .extend({ get children() { return z.array(topicNodeSchema); } })
  .meta({ id: "TopicNode" });

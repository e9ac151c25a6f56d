import { z } from "zod";
import { uuidField } from "@/lib/ids.ts";

/** Documented limits of topics (docs/topics.md). */
export const MAX_TOPIC_NAME_LENGTH = 100;
export const MAX_TOPIC_DESCRIPTION_LENGTH = 2000;
export const MAX_TOPIC_ICON_LENGTH = 64;
/** Topics per hub, archived ones included: GET /v1/topics returns a hub's whole tree, so this bounds it. */
export const MAX_TOPICS_PER_HUB = 500;
/** Levels of the tree: a root is level 0, so the deepest topic is level 4. */
export const MAX_TOPIC_DEPTH = 5;
export const MAX_REORDER_OPERATIONS = MAX_TOPICS_PER_HUB;
export const MAX_POSITION = 1_000_000;

const nameSchema = z
  .string({ error: "name is required" })
  .trim()
  .min(1, "name must not be empty")
  .max(MAX_TOPIC_NAME_LENGTH, `name is at most ${MAX_TOPIC_NAME_LENGTH} characters`);
const hubIdSchema = uuidField("hub_id must be a hub id (not a slug)");
const description = z.string().trim().max(MAX_TOPIC_DESCRIPTION_LENGTH, `description is at most ${MAX_TOPIC_DESCRIPTION_LENGTH} characters`);
const icon = z.string().trim().max(MAX_TOPIC_ICON_LENGTH, `icon is at most ${MAX_TOPIC_ICON_LENGTH} characters`);
const position = z.int("position must be an integer").min(0, "position must be 0 or more").max(MAX_POSITION, `position is at most ${MAX_POSITION}`);
/** `""` and null both mean "the root" (the Memax SDK sends either). */
const parentId = z.union([uuidField("parent_id must be a topic id"), z.literal(""), z.null()]).transform((value) => value || null);

export const createTopicBodySchema = z.strictObject({
  name: nameSchema,
  hub_id: z.union([hubIdSchema, z.literal("")]).transform((value) => value || undefined).optional(),
  description: description.optional(),
  icon: icon.optional(),
  parent_id: parentId.optional(),
  position: position.optional(),
  pinned: z.boolean().optional(),
});
export type CreateTopicBody = z.output<typeof createTopicBodySchema>;

// In an update, "" is a value: it clears a description or icon, and moves a topic to the root.
export const updateTopicBodySchema = z.strictObject({
  name: nameSchema.optional(),
  description: description.meta({ keepEmpty: true }).optional(),
  icon: icon.meta({ keepEmpty: true }).optional(),
  parent_id: parentId.meta({ keepEmpty: true }).optional(),
  position: position.optional(),
  pinned: z.boolean().optional(),
});
export type UpdateTopicBody = z.output<typeof updateTopicBodySchema>;

export const topicHubQuerySchema = z.object({
  hub_id: z.union([hubIdSchema, z.literal("")]).transform((value) => value || undefined).optional(),
});

export const assignMemoryBodySchema = z.strictObject({
  memory_id: uuidField("memory_id must be a memory id"),
  confidence: z.number().min(0).max(1).optional(),
});

export const reorderBodySchema = z.strictObject({
  operations: z
    .array(z.strictObject({ topic_id: uuidField("topic_id must be a topic id"), position, parent_id: parentId.meta({ keepEmpty: true }).optional() }))
    .min(1, "give at least one operation")
    .max(MAX_REORDER_OPERATIONS, `at most ${MAX_REORDER_OPERATIONS} operations`),
});
export type ReorderBody = z.output<typeof reorderBodySchema>;

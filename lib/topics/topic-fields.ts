import { z } from "zod";

/** Documented limits of topics (docs/topics.md). */
export const MAX_TOPIC_NAME_LENGTH = 100;
export const MAX_TOPICS_PER_HUB = 500;

const nameSchema = z
  .string({ error: "name is required" })
  .trim()
  .min(1, "name must not be empty")
  .max(MAX_TOPIC_NAME_LENGTH, `name is at most ${MAX_TOPIC_NAME_LENGTH} characters`);

export const createTopicBodySchema = z.strictObject({ name: nameSchema, hub_id: z.uuid("hub_id must be a hub id (not a slug)").optional() });
export type CreateTopicBody = z.output<typeof createTopicBodySchema>;

export const updateTopicBodySchema = z.strictObject({ name: nameSchema });
export type UpdateTopicBody = z.output<typeof updateTopicBodySchema>;

export const listTopicsQuerySchema = z.object({
  limit: z.string().optional(),
  cursor: z.string().optional(),
  hub_id: z.uuid("hub_id must be a hub id (not a slug)").optional(),
});
export type ListTopicsQuery = z.output<typeof listTopicsQuerySchema>;

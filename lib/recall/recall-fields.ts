import { z } from "zod";
import { normalizeId, uuidField } from "@/lib/ids.ts";
import { timestampSchema } from "@/lib/api/timestamp.ts";
import { KINDS, SOURCES, projectContextSchema } from "@/lib/memories/memory-fields.ts";

export const RECALL_DEFAULT_LIMIT = 10;
export const RECALL_MAX_LIMIT = 50;
export const MAX_QUERY_CHARS = 4000;
export const MAX_HUB_IDS = 100;

export const recallBodySchema = z.object({
  query: z.string().trim().min(1, "query must not be empty").max(MAX_QUERY_CHARS, `query is at most ${MAX_QUERY_CHARS} characters`),
  // null is the default too: Memax's CLI sends it for a --limit that is not a number (parseInt's NaN in JSON).
  limit: z.int("limit must be an integer").min(1, "limit must be at least 1").nullish(),
  hub_ids: z.array(uuidField("hub_ids must be hub ids (not slugs)")).max(MAX_HUB_IDS, `at most ${MAX_HUB_IDS} hub_ids`).optional(),
  kind: z.enum(KINDS).optional(),
  // Accepted for compatibility; recall does not filter by tags.
  tags: z.array(z.string().max(64)).max(50).optional(),
  topic_id: uuidField("topic_id must be a topic id").optional(),
  no_rerank: z.boolean().optional(),
  // Accepted for compatibility; archived and processing memories are never recalled.
  include_archived: z.boolean().optional(),
  source: z.enum([...SOURCES, "ui", "tool", "other"]).or(z.string().max(64)).optional(),
  working_dir: z.string().max(1024).optional(),
  project_context: projectContextSchema.optional(),
  created_after: timestampSchema("created_after must be an RFC 3339 timestamp").optional(),
  created_before: timestampSchema("created_before must be an RFC 3339 timestamp").optional(),
});
export type RecallBody = z.output<typeof recallBodySchema>;

export const SEARCH_DEFAULT_LIMIT = 10;
export const SEARCH_MAX_LIMIT = 50;
/** A search box's text, not a pasted document. */
export const MAX_SEARCH_CHARS = 500;

export const searchMemoriesQuerySchema = z.object({
  q: z.string().trim().min(1, "q must not be empty").max(MAX_SEARCH_CHARS, `q is at most ${MAX_SEARCH_CHARS} characters`),
  limit: z.string().optional(),
  hub_id: z.string().overwrite(normalizeId).optional(),
  topic_id: uuidField("topic_id must be a topic id").optional(),
});
export type SearchMemoriesQuery = z.output<typeof searchMemoriesQuerySchema>;

// The bar asks on every keystroke, so an empty q is an empty answer rather than a 400.
export const barSearchQuerySchema = searchMemoriesQuerySchema.extend({
  q: z.string().trim().max(MAX_SEARCH_CHARS, `q is at most ${MAX_SEARCH_CHARS} characters`).optional(),
});
export type BarSearchQuery = z.output<typeof barSearchQuerySchema>;

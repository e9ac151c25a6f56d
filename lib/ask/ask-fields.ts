import { z } from "zod";
import { uuidField } from "@/lib/ids.ts";
import { MAX_QUERY_CHARS, recallBodySchema } from "@/lib/recall/recall-fields.ts";

export const askBodySchema = z.object({
  query: z.string().trim().min(1, "query must not be empty").max(MAX_QUERY_CHARS, `query is at most ${MAX_QUERY_CHARS} characters`),
  // null is the default too, as for recall: Memax's CLI sends it for a --limit that is not a number (parseInt's NaN in JSON).
  // Recall's own field: more than it returns is clamped there (RECALL_MAX_LIMIT), as recall clamps it, not refused.
  limit: recallBodySchema.shape.limit,
  topic_id: uuidField("topic_id must be a topic id").optional(),
  no_rerank: z.boolean().optional(),
  locale: z.string().max(16).optional(),
  // Memax clients send "auto" | "haiku" | "sonnet"; the server's configured model answers either way.
  model: z.string().max(64).optional(),
});
export type AskBody = z.output<typeof askBodySchema>;

/** Sources handed to the answer step: recall's best, no more (beyond that they only add noise and cost). */
export const ASK_DEFAULT_LIMIT = 10;

import { z } from "zod";

/** One recalled memory (the spec's "Recalled memory"): the matching chunk and where it lives. */
export const recalledMemorySchema = z
  .object({
    id: z.string(),
    title: z.string(),
    summary: z.string(),
    chunk_content: z.string(),
    heading_chain: z.string(),
    relevance_score: z.number(),
    kind: z.string(),
    stability: z.string(),
    source: z.string(),
    age: z.string().meta({ description: 'Human age of the memory ("3 days ago"), in X-Timezone when given' }),
    created_at: z.string(),
    hub_id: z.string().optional(),
    hub_name: z.string().optional(),
    topic_id: z.string().optional(),
    topic_name: z.string().optional(),
  })
  .meta({ id: "RecalledMemory" });

/** POST /v1/recall's data; the route types its result by this schema so the two cannot drift. */
export const recallResponseSchema = z
  .object({
    memories: z.array(recalledMemorySchema),
    query_metadata: z.object({
      intent: z.string(),
      kinds_searched: z.array(z.string()),
      total_candidates: z.int(),
      reranked: z.boolean(),
      rerank_reason: z.string().optional(),
      latency_ms: z.number(),
      filters: z.object({
        hub_ids: z.array(z.string()),
        kind: z.string().nullable(),
        topic_id: z.string().nullable(),
        created_after: z.string().nullable(),
        created_before: z.string().nullable(),
        author: z.object({ id: z.string(), name: z.string() }).nullable(),
        time_phrase: z.string().optional(),
        author_phrase: z.string().optional(),
      }),
    }),
  })
  .meta({ id: "RecallResult" });
export type RecallResponse = z.output<typeof recallResponseSchema>;

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { lexicalSearch } from "./lexical-search.ts";
import { loadCandidates } from "./load-candidates.ts";
import { loadRecalled, type RecalledMemory } from "./load-recalled.ts";
import { RELEVANCE_FLOOR, fusedRank, relevanceLogit, sigmoid } from "./relevance-score.ts";

export const MAX_RELATED = 5;

/**
 * Up to five other memories of the caller's hubs closest to this one: by the
 * centroid of its chunk embeddings, or — not embedded yet — by its title and
 * opening words. Same entry shape and score scale as recall.
 */
export async function relatedMemories(ctx: AuthContext, id: string): Promise<RecalledMemory[]> {
  const hubIds = (await readableHubs(ctx)).map((m) => m.hub.id);
  const memory = isUuid(id)
    ? await ctx.db.memory.findFirst({ where: { id, hubId: { in: hubIds } }, select: { id: true, title: true, summary: true, content: true } })
    : null;
  if (!memory) throw new ApiError("not_found", "Memory not found");

  const scope = { hubIds };
  const [centroid] = await ctx.sql.query<{ vector: string | null; chunks: bigint | number | string }>(
    `SELECT avg(embedding)::text AS vector, count(*) AS chunks FROM chunks WHERE memory_id = $1::uuid AND embedding IS NOT NULL`,
    [memory.id],
  );
  const picks = new Map<string, { chunkId: string | null; score: number }>();
  if (centroid?.vector) {
    const vector = JSON.parse(centroid.vector) as number[];
    const norm = Math.hypot(...vector) || 1;
    const { vectorHits } = await loadCandidates(ctx.sql, {
      userId: ctx.user.id,
      vector: vector.map((x) => x / norm),
      scope,
      k: MAX_RELATED * 8 + Number(centroid.chunks),
      chunkCount: Number.POSITIVE_INFINITY,
      chunkIds: [],
      memoryIds: [],
      entities: [],
    });
    for (const hit of vectorHits) {
      if (hit.memoryId === memory.id || picks.has(hit.memoryId)) continue;
      const fused = fusedRank([picks.size + 1], 1);
      const score = sigmoid(relevanceLogit({ similarity: hit.similarity, coverage: 0, bm25: 0, fused, missingEntities: 0, entities: 0 }));
      if (score >= RELEVANCE_FLOOR) picks.set(hit.memoryId, { chunkId: hit.chunkId, score });
    }
  } else {
    const text = `${memory.title}\n${memory.summary || memory.content.slice(0, 400)}`;
    const { stats, hits } = await lexicalSearch(ctx.sql, { userId: ctx.user.id, hubIds, text }, {}, MAX_RELATED * 8);
    for (const hit of hits) {
      if (hit.memoryId === memory.id || picks.has(hit.memoryId)) continue;
      const fused = fusedRank([picks.size + 1], 1);
      const evidence = { similarity: null, coverage: hit.matchedIdf / (stats.queryIdf || 1), bm25: hit.bm25 / (stats.queryIdf || 1), fused, missingEntities: 0, entities: 0 };
      const score = sigmoid(relevanceLogit(evidence));
      if (score >= RELEVANCE_FLOOR) picks.set(hit.memoryId, { chunkId: hit.chunkId, score });
    }
  }
  const top = [...picks.entries()]
    .sort((a, b) => b[1].score - a[1].score)
    .slice(0, MAX_RELATED)
    .map(([memoryId, pick]) => ({ memoryId, ...pick }));
  return loadRecalled(ctx.sql, top, { now: ctx.now(), withHub: hubIds.length > 1 });
}

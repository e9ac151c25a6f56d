import type { AuthContext } from "@/lib/api/context.ts";
import { withShownTopics } from "@/lib/topics/topics-being-deleted.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { lexicalSearch } from "./lexical-search.ts";
import { loadCandidates } from "./load-candidates.ts";
import { serializeMemory, type MemoryObject } from "@/lib/memories/serialize-memory.ts";
import { ANSWERABLE_LOGIT, RELEVANCE_FLOOR, answerableLogit, normaliseLeg, relevanceLogit, sigmoid } from "./relevance-score.ts";

export const MAX_RELATED = 5;

export interface RelatedMemory {
  /** The Memory object of lists (no content). */
  memory: MemoryObject;
  /** Recall's calibrated 0..1 relevance scale. */
  similarity: number;
}

/**
 * Up to five other memories of the caller's hubs closest to this one: by the
 * centroid of its chunk embeddings, or — not embedded yet, or an edit of it being
 * processed — by its title and opening words. `[{ memory, similarity }]`, on recall's score scale.
 */
export async function relatedMemories(ctx: AuthContext, id: string): Promise<RelatedMemory[]> {
  const hubIds = (await readableHubs(ctx)).map((m) => m.hub.id);
  // Its opening words, not its whole text (up to 3 MiB read for these 400 characters on every call).
  const [memory] = isUuid(id)
    ? await ctx.sql.query<{ id: string; title: string; summary: string; opening: string; reprocessing: boolean }>(
        `SELECT id, title, summary, left(content, 400) AS opening, processing_status IN ('pending', 'running') AS reprocessing
           FROM memories WHERE id = $1::uuid AND hub_id = ANY($2::uuid[])`,
        [id, hubIds],
      )
    : [];
  if (!memory) throw new ApiError("not_found", "Memory not found");

  const scope = { hubIds };
  // While an edit is processed its chunks and summary are still the old version's: recall neither
  // matches nor shows them then (migration 20261129130000), and neighbours are found by its current
  // words, as for a memory not embedded yet; the old vectors listed neighbours of text it no longer holds.
  const [centroid] = memory.reprocessing
    ? []
    : await ctx.sql.query<{ vector: string | null; chunks: bigint | number | string }>(
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
    // One leg: the fused value is its normalised similarity (as recall's with only that leg).
    const normalised = normaliseLeg(new Map(vectorHits.filter((hit) => hit.memoryId !== memory.id).map((hit) => [hit.chunkId, hit.similarity])));
    for (const hit of vectorHits) {
      if (hit.memoryId === memory.id || picks.has(hit.memoryId)) continue;
      const fused = normalised.get(hit.chunkId) ?? 0;
      const evidence = { similarity: hit.similarity, coverage: 0, bm25: 0, fused, missingEntities: 0, entities: 0 };
      // Unrelated neighbours (every memory has nearest ones) are not listed.
      if ((answerableLogit(evidence) ?? -Infinity) >= ANSWERABLE_LOGIT) picks.set(hit.memoryId, { chunkId: hit.chunkId, score: sigmoid(relevanceLogit(evidence)) });
    }
  } else {
    const text = `${memory.title}\n${(!memory.reprocessing && memory.summary) || memory.opening}`;
    const { stats, hits } = await lexicalSearch(ctx.sql, { userId: ctx.user.id, hubIds, text }, {}, MAX_RELATED * 8);
    const normalised = normaliseLeg(new Map(hits.filter((hit) => hit.memoryId !== memory.id).map((hit) => [hit.chunkId ?? hit.memoryId, hit.bm25])));
    for (const hit of hits) {
      if (hit.memoryId === memory.id || picks.has(hit.memoryId)) continue;
      const fused = normalised.get(hit.chunkId ?? hit.memoryId) ?? 0;
      const evidence = { similarity: null, coverage: hit.matchedIdf / (stats.queryIdf || 1), bm25: hit.bm25 / (stats.queryIdf || 1), fused, missingEntities: 0, entities: 0 };
      const score = sigmoid(relevanceLogit(evidence));
      if (score >= RELEVANCE_FLOOR) picks.set(hit.memoryId, { chunkId: hit.chunkId, score });
    }
  }
  const top = [...picks.entries()]
    .sort((a, b) => b[1].score - a[1].score)
    .slice(0, MAX_RELATED)
    .map(([memoryId, pick]) => ({ memoryId, ...pick }));
  const found = await ctx.db.memory.findMany({ where: { id: { in: top.map((t) => t.memoryId) }, hubId: { in: hubIds }, state: "active" }, omit: { content: true } });
  // No topic shown for one being deleted, as on every read of a memory.
  const rows = new Map((await withShownTopics(ctx.sql, found)).map((row) => [row.id, row]));
  return top.flatMap(({ memoryId, score }) => {
    const row = rows.get(memoryId);
    return row ? [{ memory: serializeMemory(row), similarity: Math.round(score * 1e4) / 1e4 }] : [];
  });
}

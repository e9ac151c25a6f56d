import { topicBeingDeletedFor } from "@/lib/topics/topics-being-deleted.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import { clampInstant } from "@/lib/api/timestamp.ts";
import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { readableHubs, scopedHubIds } from "@/lib/hubs/hub-access.ts";
import { analyzeQuery, mentionsSomeone, type Intent, type QueryAnalysis, type QueryMember } from "./analyze-query.ts";
import { embedQuery } from "./embed-query.ts";
import { lexicalSearch } from "./lexical-search.ts";
import { loadCandidates, type CandidateFacts } from "./load-candidates.ts";
import { loadRecalled, type RecalledMemory } from "./load-recalled.ts";
import { RECALL_DEFAULT_LIMIT, RECALL_MAX_LIMIT, type RecallBody } from "./recall-fields.ts";
import { recordAccess } from "./record-access.ts";
import { ANSWERABLE_GAP, ANSWERABLE_LOGIT, DERIVED_FILTER_FLOOR, RELEVANCE_FLOOR, answerableLogit, fuseLegs, monotoneScores, normaliseLeg, relevanceLogit, sigmoid } from "./relevance-score.ts";
import { getReranker, rerankWithinBudget } from "./reranker.ts";
import type { SearchScope } from "./search-scope.ts";

export interface RecallInput extends RecallBody {
  /** The X-Hub-ID header: that hub's memories rank a little higher. */
  preferred_hub_id?: string;
  /**
   * false for a reader that is not a person (a custom board's refresh): its results are not
   * accesses, or a board would keep what it cites from ever looking unused to a dream.
   */
  count_access?: boolean;
}

export interface RecallFilters {
  hub_ids: string[];
  kind: string | null;
  topic_id: string | null;
  created_after: string | null;
  created_before: string | null;
  author: { id: string; name: string } | null;
  /** The query words that became created_* bounds, when any did. */
  time_phrase?: string;
  /** The query words that became the author filter, when any did. */
  author_phrase?: string;
}

export interface RecallResult {
  memories: RecalledMemory[];
  query_metadata: {
    intent: Intent;
    kinds_searched: string[];
    total_candidates: number;
    reranked: boolean;
    rerank_reason?: string;
    latency_ms: number;
    filters: RecallFilters;
  };
}

/** How many chunks each leg contributes before fusion (the vector leg: at least 3 per requested result). */
const LEG_DEPTH = 40;
/** How many memories go to the reranker (its cost grows with this). */
const RERANK_DEPTH = 30;
/** How much the reranker's judgement weighs against the first-stage score. */
const RERANK_WEIGHT = 0.6;

const INTENT_KIND: Partial<Record<Intent, string>> = { how_to: "procedural", why: "rationale", what_is: "semantic", temporal: "episodic" };
const BOOST = { preferredHub: 0.03, project: 0.04, repo: 0.05, branch: 0.01, intentKind: 0.02 };

export interface RecallTraceEntry {
  memoryId: string;
  chunkId: string | null;
  similarity: number | null;
  coverage: number;
  bm25: number;
  fused: number;
  missingEntities: number;
  entities: number;
  score: number;
  /** The ranking boosts (hub, project context, intent kind) of the memory. */
  boost: number;
  /** Whether the vector index returned this chunk (else its cosine came with a lexical hit). */
  inVectorLeg: boolean;
}

const globalForTrace = globalThis as unknown as {
  __engramRecallTrace?: (query: string, entries: RecallTraceEntry[]) => void;
  __engramRecallMode?: RecallMode;
};

/** The eval's tuning hook: every scored candidate (before the floor) of every recall. */
export function setRecallTrace(trace: ((query: string, entries: RecallTraceEntry[]) => void) | undefined): void {
  globalForTrace.__engramRecallTrace = trace;
}

interface Candidate {
  memoryId: string;
  chunkId: string | null;
  similarity: number | null;
  coverage: number;
  bm25: number;
  rawBm25: number;
}

interface Scored extends Candidate {
  score: number;
  /** The sort key: the fused order (or one leg's score in a single-leg eval mode). */
  rank: number;
}

/**
 * Which legs rank (the eval's columns: BM25 only, vectors only, fused) and whether the floor
 * applies. Production always uses the default; the eval switches it in-process.
 */
export interface RecallMode {
  legs: "hybrid" | "lexical" | "vector";
  floor: boolean;
}
const DEFAULT_MODE: RecallMode = { legs: "hybrid", floor: true };

/** The eval's switch between its columns; undefined restores the default. */
export function setRecallMode(mode: RecallMode | undefined): void {
  globalForTrace.__engramRecallMode = mode;
}

/**
 * Hybrid recall over the caller's hubs: BM25 over chunks (and over memories
 * not chunked yet) + HNSW cosine over chunk embeddings, fused into one
 * calibrated score per chunk; one entry per memory (its best chunk), optional
 * rerank, floor, limit.
 */
export async function recallMemories(ctx: AuthContext, input: RecallInput): Promise<RecallResult> {
  const started = performance.now();
  // A key limited to some hubs searches only those (the resolver's rule; the SQL intersects with membership).
  input = { ...input, hub_ids: scopedHubIds(ctx.credential, input.hub_ids) };
  const now = ctx.now();
  const limit = Math.min(input.limit ?? RECALL_DEFAULT_LIMIT, RECALL_MAX_LIMIT);

  // An author cue needs the members' names before the query can be analysed. Without one (most
  // queries) the analysis needs nothing from the database, and the lexical statement also
  // resolves the caller's hubs.
  let scoped: string[] | undefined;
  let analysis: QueryAnalysis;
  if (mentionsSomeone(input.query)) {
    const readable = new Set((await readableHubs(ctx)).map((m) => m.hub.id));
    scoped = input.hub_ids ? [...new Set(input.hub_ids)].filter((id) => readable.has(id)) : [...readable];
    analysis = analyzeQuery(input.query, now, await hubMembers(ctx, scoped), ctx.timeZone);
  } else {
    analysis = analyzeQuery(input.query, now, [], ctx.timeZone);
  }
  // Within what the database stores: "3000 years ago" reaches past year 1.
  const clamp = (at: Date | undefined) => (at ? clampInstant(at) : undefined);
  const createdAfter = clamp(latest(input.created_after ? new Date(input.created_after) : undefined, analysis.createdAfter));
  const createdBefore = clamp(earliest(input.created_before ? new Date(input.created_before) : undefined, analysis.createdBefore));
  const noDates = Boolean(createdAfter && createdBefore && createdAfter >= createdBefore);

  const searchFilters = { kind: input.kind, topicId: input.topic_id, createdAfter, createdBefore, ownerId: analysis.author?.id };

  // Inference overlaps the SQL from here on.
  const embedding = noDates || scoped?.length === 0 ? undefined : await embedInBackground(ctx, analysis.searchText);
  // A topic being deleted is not_found to every read and its memories show none: filtering on it finds
  // nothing, as on a topic that does not exist (GET /v1/memories?topic_id= alike). Checked beside the
  // lexical leg, which still runs, so the answer (hubs searched, time taken) is that of a missing topic;
  // only among the caller's hubs, so a topic elsewhere is just missing.
  const hiddenTopic =
    embedding && input.topic_id !== undefined ? topicBeingDeletedFor(ctx.sql, ctx.user.id, scoped ?? input.hub_ids, input.topic_id) : Promise.resolve(false);
  // Thrown by the Promise.all below, or moot when the lexical leg failed first.
  hiddenTopic.catch(() => {});
  const [lexical, hidden] = embedding
    ? await Promise.all([
        lexicalSearch(
          ctx.sql,
          {
            userId: ctx.user.id,
            hubIds: scoped ?? input.hub_ids,
            // Chinese words also ask in English, as chunks' Chinese is indexed in English too (store-chunks.ts).
            text: `${analysis.searchText} ${await hanGlossWords(analysis.searchText)}`.trim(),
            entities: analysis.entities,
          },
          searchFilters,
          LEG_DEPTH * 2,
        ),
        hiddenTopic,
      ])
    : [undefined, false];
  const found = lexical?.stats.hubIds ?? scoped ?? [];
  const order = new Map((input.hub_ids ?? []).map((id, i) => [id, i]));
  const hubIds = input.hub_ids ? [...found].sort((x, y) => order.get(x)! - order.get(y)!) : found;
  const scope: SearchScope = { hubIds, ...searchFilters };
  const filters: RecallFilters = {
    hub_ids: hubIds,
    kind: input.kind ?? null,
    topic_id: input.topic_id ?? null,
    created_after: createdAfter?.toISOString() ?? null,
    created_before: createdBefore?.toISOString() ?? null,
    author: analysis.author ? { id: analysis.author.id, name: analysis.author.name } : null,
    ...(analysis.timePhrase && { time_phrase: analysis.timePhrase }),
    ...(analysis.author && { author_phrase: analysis.author.phrase }),
  };
  const metadata = (fields: Pick<RecallResult["query_metadata"], "total_candidates" | "reranked" | "rerank_reason">) => ({
    intent: analysis.intent,
    kinds_searched: input.kind ? [input.kind] : ["all"],
    ...fields,
    latency_ms: Math.round((performance.now() - started) * 10) / 10,
    filters,
  });

  if (!embedding || !lexical || hubIds.length === 0 || hidden) {
    return { memories: [], query_metadata: metadata({ total_candidates: 0, reranked: false, rerank_reason: input.no_rerank ? "disabled_by_request" : "no_candidates" }) };
  }

  const stats = lexical.stats;
  const vector = await withinBudget(embedding.vector, queryEmbeddingBudgetMs()).catch((error) => {
    console.error("[engram] recall: query embedding failed; lexical only", error);
    return null;
  });
  const { similarities, vectorHits, facts } = await loadCandidates(ctx.sql, {
    userId: ctx.user.id,
    vector,
    scope,
    k: Math.max(LEG_DEPTH, limit * 3),
    chunkCount: stats.chunkCount,
    chunkIds: lexical.hits.flatMap((hit) => (hit.chunkId ? [hit.chunkId] : [])),
    memoryIds: lexical.hits.flatMap((hit) => (hit.chunkId ? [] : [hit.memoryId])),
    entities: stats.entities,
  });

  const idfMass = stats.queryIdf;
  const mode = globalForTrace.__engramRecallMode ?? DEFAULT_MODE;
  const chunkScores = new Map<string, Candidate>();
  if (mode.legs !== "vector") {
    for (const hit of lexical.hits) {
      const key = hit.chunkId ?? `memory:${hit.memoryId}`;
      chunkScores.set(key, {
        memoryId: hit.memoryId,
        chunkId: hit.chunkId,
        similarity: hit.chunkId ? (similarities.get(hit.chunkId) ?? null) : null,
        coverage: idfMass > 0 ? hit.matchedIdf / idfMass : 0,
        bm25: idfMass > 0 ? hit.bm25 / idfMass : 0,
        rawBm25: hit.bm25,
      });
    }
  }
  if (mode.legs !== "lexical") {
    for (const hit of vectorHits) {
      if (chunkScores.has(hit.chunkId)) continue;
      chunkScores.set(hit.chunkId, { memoryId: hit.memoryId, chunkId: hit.chunkId, similarity: hit.similarity, coverage: 0, bm25: 0, rawBm25: 0 });
    }
  }
  const lexicalChunkIds = new Set(lexical.hits.map((hit) => hit.chunkId));
  const totalCandidates = lexical.candidates + vectorHits.filter((hit) => !lexicalChunkIds.has(hit.chunkId)).length;

  // Each leg scores memories by their best chunk; the normalised scores are fused (relevance-score.ts).
  const vectorChunkIds = new Set(vectorHits.map((hit) => hit.chunkId));
  const lexicalBest = new Map<string, number>();
  const vectorBest = new Map<string, number>();
  for (const candidate of chunkScores.values()) {
    if (candidate.rawBm25 > 0) lexicalBest.set(candidate.memoryId, Math.max(lexicalBest.get(candidate.memoryId) ?? 0, candidate.rawBm25));
    // The vector leg is what the index returned; in hybrid mode a lexical hit's own cosine counts too.
    const inVectorLeg = candidate.chunkId !== null && (mode.legs === "hybrid" || vectorChunkIds.has(candidate.chunkId));
    if (candidate.similarity !== null && inVectorLeg) {
      vectorBest.set(candidate.memoryId, Math.max(vectorBest.get(candidate.memoryId) ?? -1, candidate.similarity));
    }
  }
  const lexicalNorm = normaliseLeg(lexicalBest);
  const vectorNorm = normaliseLeg(vectorBest);
  // The order of a question the model cannot read comes from the lexical leg (Embedder.reads);
  // its cosines still count as evidence for the score and the floor, and the vector leg's finds stay in.
  const unreadable = mode.legs === "hybrid" && (await (await getEmbedder())?.reads?.(analysis.searchText)) === false;
  const legs = { lexical: mode.legs !== "vector", vector: mode.legs !== "lexical" && vector !== null && !unreadable };

  // A time or author phrase is itself the question ("what did Mira push last week"): list what
  // matches it, ranked by the rest of the query, instead of demanding the rest match on its own.
  const derived = Boolean(analysis.timePhrase || analysis.author);
  const floor = !mode.floor ? -1 : derived ? DERIVED_FILTER_FLOOR : RELEVANCE_FLOOR;
  // An unrelated question (no candidate with enough evidence of its own) gets nothing.
  let answerable = -Infinity;
  const memoryGate = new Map<string, number>();
  const best = new Map<string, Scored>();
  const traced: RecallTraceEntry[] = [];
  for (const candidate of chunkScores.values()) {
    const fact = facts.get(candidate.memoryId);
    if (!fact) continue;
    // A chunk not embedded yet (or a memory not chunked yet) is judged by the leg that can see it.
    const fused = fuseLegs(lexicalNorm.get(candidate.memoryId), vectorNorm.get(candidate.memoryId), candidate.similarity === null ? { ...legs, vector: false } : legs);
    const evidence = {
      similarity: candidate.similarity,
      coverage: candidate.coverage,
      bm25: candidate.bm25,
      fused,
      missingEntities: fact.missingEntities,
      entities: stats.entities.length,
    };
    const score = sigmoid(relevanceLogit(evidence));
    if (globalForTrace.__engramRecallTrace) {
      const inVectorLeg = candidate.chunkId !== null && vectorChunkIds.has(candidate.chunkId);
      traced.push({ memoryId: candidate.memoryId, chunkId: candidate.chunkId, ...evidence, score, boost: boost(fact, input, analysis.intent), inVectorLeg });
    }
    const gate = answerableLogit(evidence);
    if (gate === null && score < floor) continue;
    answerable = Math.max(answerable, gate ?? Infinity);
    memoryGate.set(candidate.memoryId, Math.max(memoryGate.get(candidate.memoryId) ?? -Infinity, gate ?? Infinity));
    const order =
      mode.legs === "lexical" ? (lexicalBest.get(candidate.memoryId) ?? 0) :
      mode.legs === "vector" ? (vectorBest.get(candidate.memoryId) ?? -1) :
      fused + boost(fact, input, analysis.intent);
    const previous = best.get(candidate.memoryId);
    // The memory's entry shows its best-scoring chunk; its place comes from the fused order.
    if (!previous || score > previous.score) best.set(candidate.memoryId, { ...candidate, score, rank: order });
  }
  globalForTrace.__engramRecallTrace?.(input.query, traced);
  // The floor: nothing for an unrelated question; otherwise drop what is far weaker than the best.
  if (mode.floor && !derived) {
    for (const id of best.keys()) {
      const gate = memoryGate.get(id)!;
      if (answerable < ANSWERABLE_LOGIT || gate < answerable - ANSWERABLE_GAP) best.delete(id);
    }
  }
  // Ties in the fused order go to the stronger evidence.
  let ranked = [...best.values()].sort((a, b) => b.rank - a.rank || b.score - a.score || a.memoryId.localeCompare(b.memoryId));
  // Scores fall along the order; boosts (capped at 1) lift what they lift in the order too.
  const shown = monotoneScores(ranked.map((item) => item.score));
  ranked = ranked.map((item, i) => ({ ...item, score: Math.min(1, shown[i]! + boost(facts.get(item.memoryId)!, input, analysis.intent)) }));

  let reranked = false;
  let rerankReason: string | undefined;
  const withHub = hubIds.length > 1;
  let loaded: Map<string, RecalledMemory> | undefined;
  const pool = ranked.slice(0, Math.max(limit, Math.min(RERANK_DEPTH, ranked.length)));
  if (pool.length > 0 && !input.no_rerank && getReranker()) {
    const passages = await loadRecalled(ctx.sql, pool, { now, withHub, timeZone: ctx.timeZone, userId: ctx.user.id, hubIds });
    loaded = new Map(passages.map((p) => [p.id, p]));
    const outcome = await rerankWithinBudget(
      analysis.searchText,
      passages.map((p) => `${p.title}\n${p.heading_chain}\n${p.chunk_content}`.slice(0, 4000)),
      { noRerank: false },
    );
    if (outcome.reranked) {
      reranked = true;
      const byMemory = new Map(passages.map((p, i) => [p.id, outcome.scores[i] ?? 0]));
      ranked = pool
        .map((item) => {
          const blended = (1 - RERANK_WEIGHT) * item.score + RERANK_WEIGHT * (byMemory.get(item.memoryId) ?? 0);
          return { ...item, score: blended, rank: blended };
        })
        .filter((item) => item.rank >= floor)
        .sort((a, b) => b.rank - a.rank || a.memoryId.localeCompare(b.memoryId));
    } else {
      rerankReason = outcome.reason;
    }
  } else {
    rerankReason = input.no_rerank ? "disabled_by_request" : pool.length === 0 ? "no_candidates" : "no_reranker_configured";
  }

  const top = ranked.slice(0, limit);
  // The reranked pool already holds every entry's fields; only the scores changed.
  const memories = loaded
    ? top.flatMap((item) => {
        const entry = loaded!.get(item.memoryId);
        return entry ? [{ ...entry, relevance_score: Math.round(item.score * 1000) / 1000 }] : [];
      })
    : await loadRecalled(ctx.sql, top, { now, withHub, timeZone: ctx.timeZone, userId: ctx.user.id, hubIds });
  if (input.count_access !== false) recordAccess(ctx.db, memories.map((m) => m.id), now);
  return {
    memories,
    query_metadata: metadata({ total_candidates: totalCandidates, reranked, ...(rerankReason && { rerank_reason: rerankReason }) }),
  };
}

function boost(fact: CandidateFacts, input: RecallInput, intent: Intent): number {
  let total = 0;
  if (input.preferred_hub_id && fact.hubId === input.preferred_hub_id) total += BOOST.preferredHub;
  const wanted = input.project_context;
  const have = fact.projectContext;
  if (wanted && have) {
    const same = (a?: string, b?: string) => Boolean(a && b && a.trim().toLowerCase() === b.trim().toLowerCase());
    if (same(wanted.repo, have.repo)) total += BOOST.repo;
    if (same(wanted.project, have.project)) total += BOOST.project;
    if (same(wanted.branch, have.branch)) total += BOOST.branch;
  }
  if (INTENT_KIND[intent] === fact.kind) total += BOOST.intentKind;
  return total;
}

/**
 * ENGRAM_QUERY_EMBED_TIMEOUT_MS (default 5000): how long a recall waits for its query's embedding.
 * A stalled embeddings provider then costs a recall this long and its vector leg, never the
 * request (the lexical leg answers); the embedding goes on and fills the cache for next time.
 */
function queryEmbeddingBudgetMs(): number {
  return positiveIntEnv("ENGRAM_QUERY_EMBED_TIMEOUT_MS", 5000);
}

async function withinBudget<T>(pending: Promise<T | null>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => {
      console.warn(`[engram] recall: the query embedding took over ${ms} ms; lexical only`);
      resolve(null);
    }, ms);
  });
  try {
    return await Promise.race([pending, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Starts the query embedding on ONNX threads and returns its pending result (null: no embedder).
 * Embedded Postgres runs on this thread and its statements never yield to the event loop: let the
 * embedder start its batch (on a later turn of the loop) before the database takes the thread.
 */
async function embedInBackground(ctx: AuthContext, text: string): Promise<{ vector: Promise<number[] | null> }> {
  const vector = getEmbedder().then((embedder) => (embedder ? embedQuery(embedder, text, ctx.user.id) : null));
  vector.catch(() => undefined);
  if (ctx.dbKind === "pglite") for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
  return { vector };
}

async function hubMembers(ctx: AuthContext, hubIds: string[]): Promise<QueryMember[]> {
  const rows = await ctx.db.hubMember.findMany({
    where: { hubId: { in: hubIds } },
    select: { user: { select: { id: true, name: true } } },
    distinct: ["userId"],
    take: 2000,
  });
  return rows.map((row) => row.user);
}

function latest(a?: Date, b?: Date): Date | undefined {
  if (!a) return b;
  if (!b) return a;
  return a > b ? a : b;
}

function earliest(a?: Date, b?: Date): Date | undefined {
  if (!a) return b;
  if (!b) return a;
  return a < b ? a : b;
}

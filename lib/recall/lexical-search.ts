import type { DbClient } from "@/lib/db/database.ts";
import { searchScope, type SearchScope } from "./search-scope.ts";

/** BM25 parameters (the usual defaults; chunks are short and similar in length). */
const K1 = 1.2;
const B = 0.75;
/** Postings (sum of df) that single words may contribute to the candidate set. */
const CANDIDATE_BUDGET = 1000;
/** Commoner words beyond the budget select in pairs; at most this many of them. */
const MAX_PAIRED_TERMS = 6;
/** Most chunks that are read and scored per query; bounds the cost of very common words. */
const MAX_CANDIDATES = 2000;
/** Unprocessed memories scored whole (read-your-writes). */
const MAX_UNINDEXED_CANDIDATES = 500;
/** Candidates re-scored with exact term frequencies. */
const RESCORED = 80;
/** Candidates kept by the cheap first cut. */
const PRE_RANKED = 300;
/** An entity whose rarest word is in more than this share of chunks is not specific enough to require. */
const SPECIFIC_ENTITY_SHARE = 0.05;
/** At most this many query terms are used (the rarest); a pasted paragraph must not cost more. */
const MAX_TERMS = 32;

export interface QueryTerm {
  term: string;
  df: number;
  idf: number;
}

export interface LexicalStats {
  terms: QueryTerm[];
  /** Chunks in the searched hubs. */
  chunkCount: number;
  averageLength: number;
  /** Sum of idf over all query terms: what a document matching every word would have. */
  queryIdf: number;
  /**
   * The query's entities that are specific in these hubs (rare or unseen words),
   * each as its analysed lexemes. Common words that happen to be capitalised are dropped.
   */
  entities: { text: string; lexemes: string[] }[];
}

export interface LexicalHit {
  /** null for a memory that is not chunked yet (matched as a whole). */
  chunkId: string | null;
  memoryId: string;
  /** BM25 with exact term frequencies and length normalisation. */
  bm25: number;
  /** Sum of idf of the query terms the chunk contains. */
  matchedIdf: number;
  matchedTerms: string[];
}

export interface LexicalResult {
  stats: LexicalStats;
  hits: LexicalHit[];
  candidates: number;
}

/** Analyses the query with the index's own analyser and reads BM25 statistics of the searched hubs. */
export async function lexicalStats(db: DbClient, text: string, hubIds: string[], entities: string[] = []): Promise<LexicalStats> {
  const rows = await db.$queryRawUnsafe<{ term: string | null; df: number; n: number; total: number }[]>(
    `WITH h AS (
       SELECT coalesce(sum(chunk_count), 0)::float8 AS n, coalesce(sum(total_length), 0)::float8 AS total
       FROM recall_hub_stats WHERE hub_id = ANY($2::uuid[])
     ), t AS (SELECT unnest(tsvector_to_array(engram_tsvector($1))) AS term)
     SELECT t.term,
            coalesce((SELECT sum(s.df) FROM recall_term_stats s WHERE s.hub_id = ANY($2::uuid[]) AND s.term = t.term), 0)::float8 AS df,
            h.n, h.total
     FROM h LEFT JOIN t ON true`,
    text,
    hubIds,
  );
  const n = rows[0]?.n ?? 0;
  const total = rows[0]?.total ?? 0;
  const analysed = entities.length
    ? await db.$queryRawUnsafe<{ idx: number; lexemes: string[] }[]>(
        `SELECT e.idx::int AS idx, tsvector_to_array(engram_tsvector(e.text)) AS lexemes FROM unnest($1::text[]) WITH ORDINALITY AS e(text, idx)`,
        entities,
      )
    : [];
  const terms = rows
    .filter((row): row is typeof row & { term: string } => row.term !== null)
    .map((row) => {
      const df = Number(row.df);
      const docs = Math.max(n, df);
      return { term: row.term, df, idf: Math.log(1 + (docs - df + 0.5) / (df + 0.5)) };
    })
    .sort((a, b) => a.df - b.df || a.term.localeCompare(b.term))
    .slice(0, MAX_TERMS);
  const dfOf = new Map(rows.map((row) => [row.term, Number(row.df)]));
  const specific = analysed.flatMap((row) => {
    const lexemes = row.lexemes ?? [];
    if (lexemes.length === 0) return [];
    const rarest = Math.min(...lexemes.map((lexeme) => dfOf.get(lexeme) ?? 0));
    return rarest <= Math.max(1, n * SPECIFIC_ENTITY_SHARE) ? [{ text: entities[row.idx - 1]!, lexemes }] : [];
  });
  return {
    terms,
    chunkCount: n,
    averageLength: n > 0 ? Math.max(total / n, 1) : 1,
    queryIdf: terms.reduce((sum, t) => sum + t.idf, 0),
    entities: specific,
  };
}

/**
 * The tsquery that selects candidates: OR semantics (a document needs only
 * some of the words). Rare words select on their own; once their postings
 * fill the budget, the commoner words only select documents holding two of
 * them, so one common word never makes the query read half the index. Every
 * query term still counts in the score.
 */
function candidateQuery(stats: LexicalStats): { singles: string[]; pairs: [string, string][] } {
  const present = stats.terms.filter((t) => t.df > 0);
  const singles: string[] = [];
  let budget = 0;
  let index = 0;
  for (; index < present.length; index++) {
    const term = present[index]!;
    if (singles.length > 0 && budget + term.df > CANDIDATE_BUDGET) break;
    singles.push(term.term);
    budget += term.df;
  }
  const rest = present.slice(index, index + MAX_PAIRED_TERMS).map((t) => t.term);
  const pairs: [string, string][] = [];
  for (let i = 0; i < rest.length; i++) for (let j = i + 1; j < rest.length; j++) pairs.push([rest[i]!, rest[j]!]);
  return { singles, pairs };
}

/** A lexeme in tsquery syntax: quoted, so it is taken as is (no parsing, no stemming). */
function quoteLexeme(term: string): string {
  return `'${term.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

/** BM25 over chunks (and over whole memories not chunked yet) within the scope. */
export async function lexicalSearch(db: DbClient, stats: LexicalStats, scope: SearchScope, limit: number): Promise<LexicalResult> {
  if (stats.terms.length === 0) return { stats, hits: [], candidates: 0 };
  const selector = candidateQuery(stats);
  const params: unknown[] = [
    stats.terms.map((t) => t.term),
    stats.terms.map((t) => t.idf),
    [...selector.singles.map(quoteLexeme), ...selector.pairs.map(([a, b]) => `(${quoteLexeme(a)} & ${quoteLexeme(b)})`)].join(" | ") || null,
    // Unchunked memories are matched on every term: words new to the hub are exactly what they may hold.
    stats.terms.map((t) => t.term),
    stats.averageLength,
  ];
  const chunkScope = searchScope(scope, params);
  const memoryScope = searchScope(scope, params);
  const norm = (len: string) => `(1 - ${B} + ${B} * ${len} / $5::float8)`;
  const rows = await db.$queryRawUnsafe<{ chunk_id: string | null; memory_id: string; matched_idf: number; matched_terms: string[] | null; bm25: number | null; candidates: bigint | number }[]>(
    `WITH q AS MATERIALIZED (
       SELECT t.term, t.idf, engram_terms_tsquery(ARRAY[t.term], ' | ') AS tsq FROM unnest($1::text[], $2::float8[]) AS t(term, idf)
     ), cand AS (
       SELECT c.id AS chunk_id, c.memory_id, c.search_vector AS vec, greatest(c.search_length, 1) AS len
       FROM chunks c JOIN memories m ON m.id = c.memory_id
       WHERE c.search_vector @@ $3::tsquery
         AND c.hub_id = ANY($6::uuid[]) AND ${chunkScope}
       LIMIT ${MAX_CANDIDATES}
     ), mcand AS (
       SELECT NULL::uuid AS chunk_id, m.id AS memory_id, m.search_vector AS vec, greatest(engram_tsvector_length(m.search_vector), 1) AS len
       FROM memories m
       WHERE m.processing_status IN ('pending', 'running') AND m.search_vector @@ engram_terms_tsquery($4::text[], ' | ') AND ${memoryScope}
       LIMIT ${MAX_UNINDEXED_CANDIDATES}
     ), pre AS (
       -- A cheap first cut (one ts_rank call per candidate: words of the selecting query count
       -- double, as they are the rare ones) before exact BM25 on the survivors.
       SELECT a.chunk_id, a.memory_id, a.vec, a.len
       FROM (SELECT * FROM cand UNION ALL SELECT * FROM mcand) AS a
       ORDER BY 2 * ts_rank(a.vec, coalesce($3::tsquery, engram_terms_tsquery($4::text[], ' | ')), 1) + ts_rank(a.vec, engram_terms_tsquery($4::text[], ' | '), 1) DESC
       LIMIT ${PRE_RANKED}
     ), scored AS (
       SELECT p.chunk_id, p.memory_id, p.vec, p.len, m.matched_idf, m.matched_terms
       FROM pre AS p,
            LATERAL (SELECT coalesce(sum(q.idf), 0) AS matched_idf, array_agg(q.term) AS matched_terms FROM q WHERE p.vec @@ q.tsq) AS m
     ), top AS (
       SELECT * FROM scored ORDER BY matched_idf / ${norm("len")} DESC LIMIT ${RESCORED}
     )
     SELECT top.chunk_id, top.memory_id, top.matched_idf, top.matched_terms,
            (SELECT sum(q.idf * x.tf * ${K1 + 1} / (x.tf + ${K1} * ${norm("top.len")}))
             FROM (SELECT u.lexeme, greatest(coalesce(array_length(u.positions, 1), 1), 1)::float8 AS tf FROM unnest(top.vec) AS u) AS x
             JOIN q ON q.term = x.lexeme) AS bm25,
            (SELECT count(*) FROM cand) + (SELECT count(*) FROM mcand) AS candidates
     FROM top`,
    ...params,
  );
  const hits = rows
    .map((row) => ({ chunkId: row.chunk_id, memoryId: row.memory_id, bm25: Number(row.bm25 ?? 0), matchedIdf: Number(row.matched_idf), matchedTerms: row.matched_terms ?? [] }))
    .sort((a, b) => b.bm25 - a.bm25)
    .slice(0, limit);
  return { stats, hits, candidates: Number(rows[0]?.candidates ?? 0) };
}

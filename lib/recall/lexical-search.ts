import type { SqlRunner } from "@/lib/db/database.ts";
import { scopeArguments, type SearchScope } from "./search-scope.ts";

/** BM25 parameters (the usual defaults; chunks are short and similar in length). */
const K1 = 1.2;
const B = 0.75;
/** Postings (sum of df) that single words may contribute to the candidate set. */
const CANDIDATE_BUDGET = 800;
/** Commoner words beyond the budget select in pairs; at most this many of them. */
const MAX_PAIRED_TERMS = 6;
/** Most chunks that are read and scored per query; bounds the cost of very common words. */
const MAX_CANDIDATES = 1500;
/** Unprocessed memories scored whole (read-your-writes). */
const MAX_UNINDEXED_CANDIDATES = 500;
/** Candidates re-scored with exact term frequencies. */
const RESCORED = 50;
/** Candidates kept by the cheap first cut. */
const PRE_RANKED = 150;
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

/** Analyses the query (and its entities) with the index's own analyser and reads BM25 statistics of the searched hubs, in one statement. */
export async function lexicalStats(sql: SqlRunner, text: string, hubIds: string[], entities: string[] = []): Promise<LexicalStats> {
  const all = await sql.query<{ term: string | null; df: number; n: number; total: number; idx: number | null; lexemes: string[] | null }>(
    `WITH h AS (
       SELECT coalesce(sum(chunk_count), 0)::float8 AS n, coalesce(sum(total_length), 0)::float8 AS total
       FROM recall_hub_stats WHERE hub_id = ANY($2::uuid[])
     ), t AS (SELECT unnest(tsvector_to_array(engram_tsvector($1))) AS term)
     SELECT t.term,
            coalesce((SELECT sum(s.df) FROM recall_term_stats s WHERE s.hub_id = ANY($2::uuid[]) AND s.term = t.term), 0)::float8 AS df,
            h.n, h.total, NULL::int AS idx, NULL::text[] AS lexemes
     FROM h LEFT JOIN t ON true
     UNION ALL
     SELECT NULL, NULL, NULL, NULL, e.idx::int, tsvector_to_array(engram_tsvector(e.text))
     FROM unnest($3::text[]) WITH ORDINALITY AS e(text, idx)`,
    [text, hubIds, entities],
  );
  const rows = all.filter((row) => row.idx === null);
  const analysed = all.flatMap((row) => (row.idx === null ? [] : [{ idx: Number(row.idx), lexemes: row.lexemes }])).sort((a, b) => a.idx - b.idx);
  const n = Number(rows[0]?.n ?? 0);
  const total = Number(rows[0]?.total ?? 0);
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
export async function lexicalSearch(sql: SqlRunner, stats: LexicalStats, scope: SearchScope, limit: number): Promise<LexicalResult> {
  if (stats.terms.length === 0) return { stats, hits: [], candidates: 0 };
  const selector = candidateQuery(stats);
  const rows = await sql.query<{ chunk_id: string | null; memory_id: string; matched_idf: number; matched_terms: string[] | null; bm25: number | null; candidates: bigint | number | string }>(
    `SELECT chunk_id, memory_id, matched_idf, matched_terms, bm25, candidates
     FROM engram_lexical_search($1::text[], $2::float8[], $3::tsquery, $4::tsquery, $5::float8, $6::uuid[], $7::text, $8::uuid,
                                $9::timestamptz, $10::timestamptz, $11::uuid, $12::int, $13::int, $14::int, $15::int, $16::float8, $17::float8)`,
    [
    stats.terms.map((t) => t.term),
    stats.terms.map((t) => t.idf),
    [...selector.singles.map(quoteLexeme), ...selector.pairs.map(([a, b]) => `(${quoteLexeme(a)} & ${quoteLexeme(b)})`)].join(" | ") || null,
    // Unchunked memories are matched on every term: words new to the hub are exactly what they may hold.
    stats.terms.map((t) => quoteLexeme(t.term)).join(" | "),
    stats.averageLength,
    ...scopeArguments(scope),
    MAX_CANDIDATES,
    MAX_UNINDEXED_CANDIDATES,
    PRE_RANKED,
    RESCORED,
    K1,
    B,
    ],
  );
  const hits = rows
    .map((row) => ({ chunkId: row.chunk_id, memoryId: row.memory_id, bm25: Number(row.bm25 ?? 0), matchedIdf: Number(row.matched_idf), matchedTerms: row.matched_terms ?? [] }))
    .sort((a, b) => b.bm25 - a.bm25)
    .slice(0, limit);
  return { stats, hits, candidates: Number(rows[0]?.candidates ?? 0) };
}

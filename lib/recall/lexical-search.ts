import { positiveIntEnv } from "@/lib/config.ts";
import type { SqlRunner } from "@/lib/db/database.ts";
import { lexicalIndexFor, snapshotFromRow, type IndexChange, type IndexedTerm, type IndexSnapshot } from "./lexical-index.ts";
import { filterArguments, type SearchScope } from "./search-scope.ts";

/** BM25 parameters (the usual defaults; chunks are short and similar in length). */
const K1 = 1.2;
const B = 0.75;
/** Postings (sum of df) that single words may contribute to the candidate set. */
const CANDIDATE_BUDGET = 600;
/** Commoner words beyond the budget select in pairs; at most this many of them. */
const MAX_PAIRED_TERMS = 6;
/**
 * Most chunks that are read and scored per query; bounds the cost of very common words. Chunks
 * holding a selecting (rarer) word come first, so the cap drops pair-only matches first.
 */
const MAX_CANDIDATES = 600;
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
/** Index changes replayed per query; more than this (a process idle through a bulk import) rebuilds instead. */
const MAX_CHANGES = 5000;

export interface QueryTerm {
  term: string;
  idf: number;
}

export interface LexicalStats {
  /** The hubs searched. */
  hubIds: string[];
  terms: QueryTerm[];
  /** Chunks in the searched hubs. */
  chunkCount: number;
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

export interface LexicalQuery {
  /** The caller (required): the search covers only the hubs they belong to. */
  userId: string;
  /** Narrows the search to these hubs (intersected with the caller's memberships in SQL). */
  hubIds?: string[];
  text: string;
  /** Identifiers and names in the query (checked against the hubs' vocabulary for specificity). */
  entities?: string[];
}

type Row = {
  hub_id: string | null;
  term: string | null;
  df: number | null;
  idf: number | null;
  n: number | null;
  entity_idx: number | null;
  lexemes: string[] | null;
  chunk_id: string | null;
  memory_id: string | null;
  matched_idf: number | null;
  matched_terms: string[] | null;
  bm25: number | null;
  candidates: bigint | number | string | null;
};

/**
 * BM25 over chunks (and over whole memories not chunked yet) in the caller's hubs. OR semantics: a
 * chunk needs only some of the words. Unfiltered searches score every matching chunk in the
 * process's inverted index (lexical-index.ts); filtered ones, hubs too large for the index, and
 * ENGRAM_LEXICAL_INDEX=off use the SQL leg.
 */
export async function lexicalSearch(
  sql: SqlRunner,
  query: LexicalQuery,
  filters: Omit<SearchScope, "hubIds">,
  limit: number,
): Promise<LexicalResult> {
  const filtered = filterArguments(filters).some((value) => value !== null);
  if (!filtered && process.env.ENGRAM_LEXICAL_INDEX !== "off") {
    const indexed = await indexedSearch(sql, query, limit);
    if (indexed) return indexed;
  }
  return sqlSearch(sql, query, filters, limit);
}

/** Most documents (chunks, unchunked memories) one process keeps in its lexical index; larger scopes use SQL. */
export function lexicalIndexCapacity(): number {
  return positiveIntEnv("ENGRAM_LEXICAL_INDEX_MAX_CHUNKS", 200_000);
}

type TermsRow = {
  hub_id: string | null;
  hub_chunks: number | null;
  term: string | null;
  df: number | null;
  idf: number | null;
  n: number | null;
  avgdl: number | null;
  entity_idx: number | null;
  lexemes: string[] | null;
  change_hub: string | null;
  change_memory: string | null;
  change_id: string | number | null;
  change_xid: string | null;
  snapshot_xmin: string | null;
  snapshot_xmax: string | null;
  snapshot_xip: string[] | null;
  horizon: string | null;
};

/** The index path: statistics and the index's catch-up in one statement, then postings in memory. */
async function indexedSearch(sql: SqlRunner, query: LexicalQuery, limit: number): Promise<LexicalResult | null> {
  const index = lexicalIndexFor(sql);
  const since = index.since;
  const entities = query.entities ?? [];
  const rows = await sql.query<TermsRow>(
    `SELECT hub_id, hub_chunks, term, df, idf, n, avgdl, entity_idx, lexemes, change_hub, change_memory, change_id, change_xid, snapshot_xmin, snapshot_xmax, snapshot_xip, horizon
     FROM engram_lexical_terms($1::uuid, $2::uuid[], $3::text, $4::text[], $5::int, $6::xid8, $7::xid8[], $8::int)`,
    [query.userId, query.hubIds ?? null, query.text, entities, MAX_TERMS, since?.xmax.toString() ?? null, since?.xip.map(String) ?? null, MAX_CHANGES + 1],
  );
  const hubs: { id: string; chunks: number }[] = [];
  const terms: IndexedTerm[] = [];
  const analysed: { idx: number; lexemes: string[]; df: number }[] = [];
  const changes: IndexChange[] = [];
  let chunkCount = 0;
  let avgdl = 1;
  let snapshot: IndexSnapshot = { xmin: 0n, xmax: 0n, xip: [] };
  let horizon = 0n;
  for (const row of rows) {
    if (row.snapshot_xmin !== null) {
      snapshot = snapshotFromRow(row);
      horizon = BigInt(row.horizon ?? "0");
      chunkCount = Number(row.n);
      avgdl = Number(row.avgdl);
    } else if (row.hub_id) hubs.push({ id: row.hub_id, chunks: Number(row.hub_chunks) });
    else if (row.term !== null) terms.push({ term: row.term, idf: Number(row.idf) });
    else if (row.entity_idx !== null) analysed.push({ idx: Number(row.entity_idx), lexemes: row.lexemes ?? [], df: Number(row.df) });
    else if (row.change_id !== null) changes.push({ hubId: row.change_hub!, memoryId: row.change_memory!, xid: BigInt(row.change_xid!) });
  }
  const truncated = changes.length > MAX_CHANGES;
  // Hubs too large for the index together are searched in SQL.
  if (!(await index.sync({ since, snapshot, horizon, changes: truncated ? [] : changes, truncated }, hubs, lexicalIndexCapacity()))) return null;
  const hubIds = hubs.map((hub) => hub.id);
  const stats = lexicalStats(hubIds, terms, chunkCount, analysed, entities);
  if (terms.length === 0) return { stats, hits: [], candidates: 0 };
  const found = index.search(hubIds, terms, avgdl, K1, B, Math.min(limit, RESCORED));
  return found && { stats, ...found };
}

/**
 * The SQL leg in one statement (engram_lexical_search): resolves the hubs, analyses the query
 * with the index's own analyser, reads the hubs' statistics and searches. Rare words select on
 * their own, the commoner ones in pairs once the postings budget is spent.
 */
async function sqlSearch(
  sql: SqlRunner,
  query: LexicalQuery,
  filters: Omit<SearchScope, "hubIds">,
  limit: number,
): Promise<LexicalResult> {
  const entities = query.entities ?? [];
  const rows = await sql.query<Row>(
    `SELECT hub_id, term, df, idf, n, entity_idx, lexemes, chunk_id, memory_id, matched_idf, matched_terms, bm25, candidates
     FROM engram_lexical_search($1::uuid, $2::uuid[], $3::text, $4::text[], $5::text, $6::uuid, $7::timestamptz, $8::timestamptz, $9::uuid,
                                $10::int, $11::float8, $12::int, $13::int, $14::int, $15::int, $16::int, $17::float8, $18::float8)`,
    [
      query.userId,
      query.hubIds ?? null,
      query.text,
      entities,
      ...filterArguments(filters),
      MAX_TERMS,
      CANDIDATE_BUDGET,
      MAX_PAIRED_TERMS,
      MAX_CANDIDATES,
      MAX_UNINDEXED_CANDIDATES,
      PRE_RANKED,
      RESCORED,
      K1,
      B,
    ],
  );
  const hubIds: string[] = [];
  const terms: QueryTerm[] = [];
  const analysed: { idx: number; lexemes: string[]; df: number }[] = [];
  const hits: LexicalHit[] = [];
  let candidates = 0;
  let chunkCount = 0;
  for (const row of rows) {
    if (row.hub_id) {
      hubIds.push(row.hub_id);
      chunkCount = Number(row.n);
    } else if (row.term !== null) terms.push({ term: row.term, idf: Number(row.idf) });
    else if (row.entity_idx !== null) analysed.push({ idx: Number(row.entity_idx), lexemes: row.lexemes ?? [], df: Number(row.df) });
    else if (row.memory_id) {
      hits.push({ chunkId: row.chunk_id, memoryId: row.memory_id, bm25: Number(row.bm25 ?? 0), matchedIdf: Number(row.matched_idf), matchedTerms: row.matched_terms ?? [] });
      candidates = Number(row.candidates ?? 0);
    }
  }
  const stats = lexicalStats(hubIds, terms, chunkCount, analysed, entities);
  return { stats, hits: hits.sort((a, b) => b.bm25 - a.bm25).slice(0, limit), candidates };
}

function lexicalStats(
  hubIds: string[],
  terms: QueryTerm[],
  chunkCount: number,
  analysed: { idx: number; lexemes: string[]; df: number }[],
  entities: string[],
): LexicalStats {
  const specific = analysed
    .sort((a, b) => a.idx - b.idx)
    .flatMap((row) => (row.lexemes.length > 0 && row.df <= Math.max(1, chunkCount * SPECIFIC_ENTITY_SHARE) ? [{ text: entities[row.idx - 1]!, lexemes: row.lexemes }] : []));
  return {
    hubIds,
    terms,
    chunkCount,
    queryIdf: terms.reduce((sum, t) => sum + t.idf, 0),
    entities: specific,
  };
}

import type { SqlRunner } from "@/lib/db/database.ts";
import { lexicalSearch } from "./lexical-search.ts";

/** Ways to rank the lexical leg that the eval compares (`npm run eval` prints their nDCG). */
export type LexicalRanker = "bm25" | "ts_rank" | "ts_rank_cd" | "and_ts_rank_cd";

/**
 * The caller's memories ranked by one lexical method alone, best first (at
 * most `limit`), over active memories of `hubIds` (those the user `userId` belongs to):
 * - bm25: Engram's lexical leg (OR semantics, per-hub BM25), by its raw BM25;
 * - ts_rank / ts_rank_cd: PostgreSQL's own rankers over the same OR query of
 *   the same analysed terms;
 * - and_ts_rank_cd: the common setup — `websearch_to_tsquery` (every word
 *   required) ranked by ts_rank_cd.
 * A memory ranks by its best chunk.
 */
export async function lexicalBaseline(sql: SqlRunner, ranker: LexicalRanker, userId: string, hubIds: string[], text: string, limit: number): Promise<string[]> {
  if (ranker === "bm25") {
    const { hits } = await lexicalSearch(sql, { userId, hubIds, text }, {}, 200);
    return [...new Set(hits.map((hit) => hit.memoryId))].slice(0, limit);
  }
  const rows = await sql.query<{ memory_id: string }>(
    `WITH q AS (
       SELECT CASE WHEN $3 = 'and_ts_rank_cd' THEN websearch_to_tsquery('english', $1)
                   ELSE engram_terms_tsquery(tsvector_to_array(engram_tsvector($1)), ' | ') END AS tsq
     )
     SELECT c.memory_id
     FROM q, chunks c JOIN memories m ON m.id = c.memory_id AND m.state = 'active'
     WHERE q.tsq IS NOT NULL AND c.search_vector @@ q.tsq
       AND c.hub_id = ANY(ARRAY(SELECT hm.hub_id FROM hub_members hm WHERE hm.user_id = $5::uuid AND hm.hub_id = ANY($2::uuid[])))
     GROUP BY c.memory_id
     ORDER BY max(CASE WHEN $3 = 'ts_rank' THEN ts_rank(c.search_vector, q.tsq) ELSE ts_rank_cd(c.search_vector, q.tsq) END) DESC, c.memory_id
     LIMIT $4`,
    [text, hubIds, ranker, limit, userId],
  );
  return rows.map((row) => row.memory_id);
}

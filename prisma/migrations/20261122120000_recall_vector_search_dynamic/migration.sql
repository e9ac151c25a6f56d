-- engram_vector_search, planned per call: the cached generic plan of the first version
-- (optional filters as "p IS NULL OR ...") skipped the HNSW index and scanned every chunk.
CREATE OR REPLACE FUNCTION "engram_vector_search"(
    "p_query" vector, "p_hub_ids" uuid[], "p_kind" text, "p_topic_id" uuid,
    "p_after" timestamptz, "p_before" timestamptz, "p_owner_id" uuid, "p_k" integer, "p_exact" boolean)
RETURNS TABLE ("chunk_id" uuid, "memory_id" uuid, "similarity" double precision)
LANGUAGE plpgsql STABLE
SET "hnsw.ef_search" = '100'
SET "hnsw.iterative_scan" = 'relaxed_order'
SET "hnsw.max_scan_tuples" = '40000'
AS $fn$
BEGIN
  -- Dynamic SQL: planned per call with the actual filters, so the HNSW index
  -- is used (a cached generic plan with optional filters was not).
  RETURN QUERY EXECUTE format($q$
    WITH hits AS MATERIALIZED (
      SELECT c."id" AS cid, c."memory_id" AS mid, c."embedding" <=> $1 AS distance
      FROM "chunks" c JOIN "memories" m ON m."id" = c."memory_id"
      WHERE c."hub_id" = ANY($2) AND c."embedding" IS NOT NULL AND m."state" = 'active' %s %s %s %s %s
      ORDER BY %s
      LIMIT $8
    )
    SELECT hits.cid, hits.mid, 1 - hits.distance FROM hits ORDER BY hits.distance$q$,
    CASE WHEN p_kind IS NOT NULL THEN 'AND m."kind" = $3' ELSE '' END,
    CASE WHEN p_topic_id IS NOT NULL THEN 'AND m."topic_id" = $4' ELSE '' END,
    CASE WHEN p_after IS NOT NULL THEN 'AND m."created_at" >= $5' ELSE '' END,
    CASE WHEN p_before IS NOT NULL THEN 'AND m."created_at" < $6' ELSE '' END,
    CASE WHEN p_owner_id IS NOT NULL THEN 'AND m."owner_id" = $7' ELSE '' END,
    -- "+ 0" hides the ordering from the index: an exact scan, for small scopes.
    CASE WHEN p_exact THEN '(c."embedding" <=> $1) + 0' ELSE 'c."embedding" <=> $1' END)
  USING p_query, p_hub_ids, p_kind, p_topic_id, p_after, p_before, p_owner_id, p_k;
END
$fn$;

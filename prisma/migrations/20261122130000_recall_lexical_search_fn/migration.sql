-- The lexical leg as a function: its plan is cached per session. Planned per
-- request, the statement spent longer in the planner (~18 ms embedded) than
-- in execution. Filters are optional parameters; limits come from the caller.
CREATE FUNCTION "engram_lexical_search"(
    "p_terms" text[], "p_idfs" double precision[], "p_select" tsquery, "p_all" tsquery, "p_avgdl" double precision,
    "p_hub_ids" uuid[], "p_kind" text, "p_topic_id" uuid, "p_after" timestamptz, "p_before" timestamptz, "p_owner_id" uuid,
    "p_max_candidates" integer, "p_max_unindexed" integer, "p_pre_ranked" integer, "p_rescored" integer,
    "p_k1" double precision, "p_b" double precision)
RETURNS TABLE ("chunk_id" uuid, "memory_id" uuid, "matched_idf" double precision, "matched_terms" text[], "bm25" double precision, "candidates" bigint)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH q AS MATERIALIZED (
    SELECT t.term, t.idf, "engram_terms_tsquery"(ARRAY[t.term], ' | ') AS tsq FROM unnest(p_terms, p_idfs) AS t(term, idf)
  ), cand AS MATERIALIZED (
    SELECT c."id" AS cid, c."memory_id" AS mid, c."search_vector" AS vec, greatest(c."search_length", 1) AS len
    FROM "chunks" c
    WHERE p_select IS NOT NULL AND c."search_vector" @@ p_select AND c."hub_id" = ANY(p_hub_ids)
      -- A per-row primary-key probe: a join let the planner hash the whole memories table.
      AND (SELECT m."state" = 'active' AND m."hub_id" = ANY(p_hub_ids)
                  AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
                  AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
                  AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
           FROM "memories" m WHERE m."id" = c."memory_id")
    LIMIT p_max_candidates
  ), mcand AS MATERIALIZED (
    -- Memories not chunked yet (read-your-writes) are matched whole, on every term.
    SELECT NULL::uuid AS cid, m."id" AS mid, m."search_vector" AS vec, greatest("engram_tsvector_length"(m."search_vector"), 1) AS len
    FROM "memories" m
    WHERE m."processing_status" IN ('pending', 'running') AND m."search_vector" @@ p_all
      AND m."hub_id" = ANY(p_hub_ids) AND m."state" = 'active'
      AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
      AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
      AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
    LIMIT p_max_unindexed
  ), pre AS (
    -- A cheap first cut (one ts_rank per query: the selecting words, which are the rare ones,
    -- count double) before exact BM25 on the survivors.
    SELECT a.cid, a.mid, a.vec, a.len
    FROM (SELECT * FROM cand UNION ALL SELECT * FROM mcand) AS a
    ORDER BY 2 * ts_rank(a.vec, coalesce(p_select, p_all), 1) + ts_rank(a.vec, p_all, 1) DESC
    LIMIT p_pre_ranked
  ), scored AS (
    SELECT p.cid, p.mid, p.vec, p.len, s.matched_idf, s.matched_terms
    FROM pre AS p,
         LATERAL (SELECT coalesce(sum(q.idf), 0) AS matched_idf, array_agg(q.term) AS matched_terms FROM q WHERE p.vec @@ q.tsq) AS s
  ), top AS (
    SELECT * FROM scored ORDER BY scored.matched_idf / (1 - p_b + p_b * scored.len / p_avgdl) DESC LIMIT p_rescored
  )
  SELECT top.cid, top.mid, top.matched_idf::double precision, top.matched_terms,
         (SELECT sum(q.idf * x.tf * (p_k1 + 1) / (x.tf + p_k1 * (1 - p_b + p_b * top.len / p_avgdl)))
          FROM (SELECT u.lexeme, greatest(coalesce(array_length(u.positions, 1), 1), 1)::double precision AS tf FROM unnest(top.vec) AS u) AS x
          JOIN q ON q.term = x.lexeme)::double precision,
         (SELECT count(*) FROM cand) + (SELECT count(*) FROM mcand)
  FROM top;
END
$fn$;

-- Recall latency (issue 10): a candidate memory's entity check (does it mention the query's names?)
-- copied the memory's whole tsvector three times (two setweight calls and ts_filter) to pick out the
-- entity lexemes. Each lexeme is now looked up in the tsvector itself (`@@` with a one-lexeme query,
-- a binary search). Same answers: replayed on the 300 candidate searches of bench:recall (10k chunks,
-- 109 with entities), every memory's missing-entity count was identical. Measured interleaved on the
-- embedded database, the statement's cost from entities fell from 0.56–0.81 to 0.19–0.33 ms averaged
-- over all queries (about 1.5 → 0.7 ms on a query with entities).
CREATE OR REPLACE FUNCTION "engram_recall_candidates"(
    "p_user_id" uuid, "p_query" vector, "p_hub_ids" uuid[], "p_kind" text, "p_topic_id" uuid,
    "p_after" timestamptz, "p_before" timestamptz, "p_owner_id" uuid, "p_k" integer, "p_exact" boolean,
    "p_chunk_ids" uuid[], "p_memory_ids" uuid[], "p_entity_idx" integer[], "p_entity_lexemes" text[])
RETURNS TABLE ("chunk_id" uuid, "memory_id" uuid, "similarity" double precision, "from_vector" boolean,
               "hub_id" uuid, "kind" text, "project_context" jsonb, "missing_entities" integer)
LANGUAGE plpgsql STABLE
SET "hnsw.ef_search" = '100'
SET "hnsw.iterative_scan" = 'relaxed_order'
SET "hnsw.max_scan_tuples" = '40000'
SET "random_page_cost" = '1.1'
AS $fn$
#variable_conflict use_column
-- Each entity lexeme as a one-lexeme query (quoted: any character is literal), so a memory's
-- tsvector is searched for it in place, not copied.
DECLARE p_entity_queries tsquery[] := ARRAY(SELECT ('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''')::tsquery FROM unnest(p_entity_lexemes) AS l);
BEGIN
  -- Only hubs the caller belongs to, whatever the caller passed.
  IF p_user_id IS NULL THEN
    RAISE EXCEPTION 'engram_recall_candidates: p_user_id is required' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  p_hub_ids := ARRAY(SELECT hm."hub_id" FROM "hub_members" hm WHERE hm."user_id" = p_user_id AND hm."hub_id" = ANY(p_hub_ids));
  -- The common case (no filters, default depth, HNSW) is static SQL: its plan is cached for the
  -- session. The constant LIMIT keeps the cached generic plan on the HNSW index.
  IF p_kind IS NULL AND p_topic_id IS NULL AND p_after IS NULL AND p_before IS NULL AND p_owner_id IS NULL
     AND NOT p_exact AND p_k = 40 THEN
    RETURN QUERY
    WITH hits AS MATERIALIZED (
      SELECT c."id" AS cid, c."memory_id" AS mid, c."embedding" <=> p_query AS distance
      FROM "chunks" c JOIN "memories" m ON m."id" = c."memory_id"
      WHERE p_query IS NOT NULL AND c."hub_id" = ANY(p_hub_ids) AND c."embedding" IS NOT NULL AND m."state" = 'active'
      ORDER BY c."embedding" <=> p_query
      LIMIT 40
    ), picked AS (
      SELECT hits.cid, hits.mid, 1 - hits.distance AS similarity, true AS from_vector FROM hits
      UNION ALL
      SELECT c."id", c."memory_id", 1 - (c."embedding" <=> p_query), false
      FROM "chunks" c
      WHERE c."id" = ANY(p_chunk_ids) AND c."hub_id" = ANY(p_hub_ids) AND NOT EXISTS (SELECT 1 FROM hits WHERE hits.cid = c."id")
      UNION ALL
      SELECT NULL::uuid, x.mid, NULL::double precision, false FROM unnest(p_memory_ids) AS x(mid)
    ), facts AS (
      SELECT m."id" AS fid, m."hub_id" AS fhub, m."kind" AS fkind, m."project_context" AS fcontext,
             CASE WHEN coalesce(cardinality(p_entity_lexemes), 0) = 0 THEN 0 ELSE (
               SELECT count(*) FROM (
                 SELECT e.idx FROM unnest(p_entity_idx, p_entity_queries) AS e(idx, q)
                 GROUP BY e.idx HAVING avg(CASE WHEN m."search_vector" @@ e.q THEN 1 ELSE 0 END) < 0.5
               ) AS absent)::integer END AS missing
      FROM "memories" m
      WHERE m."id" IN (SELECT picked.mid FROM picked) AND m."hub_id" = ANY(p_hub_ids)
    )
    SELECT picked.cid, picked.mid, picked.similarity, picked.from_vector, facts.fhub, facts.fkind, facts.fcontext, facts.missing
    FROM picked JOIN facts ON facts.fid = picked.mid;
    RETURN;
  END IF;
  -- Otherwise dynamic SQL, planned per call with the actual filters, so the
  -- HNSW index is used (a cached generic plan with optional filters was not).
  RETURN QUERY EXECUTE format($q$
    WITH hits AS MATERIALIZED (
      SELECT c."id" AS cid, c."memory_id" AS mid, c."embedding" <=> $1 AS distance
      FROM "chunks" c JOIN "memories" m ON m."id" = c."memory_id"
      WHERE $1 IS NOT NULL AND $8 > 0 AND c."hub_id" = ANY($2) AND c."embedding" IS NOT NULL AND m."state" = 'active' %s %s %s %s %s
      ORDER BY %s
      LIMIT $8
    ), picked AS (
      SELECT hits.cid, hits.mid, 1 - hits.distance AS similarity, true AS from_vector FROM hits
      UNION ALL
      SELECT c."id", c."memory_id", 1 - (c."embedding" <=> $1), false
      FROM "chunks" c
      WHERE c."id" = ANY($10) AND c."hub_id" = ANY($2) AND NOT EXISTS (SELECT 1 FROM hits WHERE hits.cid = c."id")
      UNION ALL
      SELECT NULL::uuid, x.mid, NULL::double precision, false FROM unnest($11) AS x(mid)
    ), facts AS (
      SELECT m."id", m."hub_id", m."kind", m."project_context",
             CASE WHEN cardinality($13) = 0 THEN 0 ELSE (
               SELECT count(*) FROM (
                 SELECT e.idx FROM unnest($12, $14) AS e(idx, q)
                 GROUP BY e.idx HAVING avg(CASE WHEN m."search_vector" @@ e.q THEN 1 ELSE 0 END) < 0.5
               ) AS absent)::integer END AS missing
      FROM "memories" m
      WHERE m."id" IN (SELECT picked.mid FROM picked) AND m."hub_id" = ANY($2)
    )
    SELECT picked.cid, picked.mid, picked.similarity, picked.from_vector, facts."hub_id", facts."kind", facts."project_context", facts.missing
    FROM picked JOIN facts ON facts."id" = picked.mid$q$,
    CASE WHEN p_kind IS NOT NULL THEN 'AND m."kind" = $3' ELSE '' END,
    CASE WHEN p_topic_id IS NOT NULL THEN 'AND m."topic_id" = $4' ELSE '' END,
    CASE WHEN p_after IS NOT NULL THEN 'AND m."created_at" >= $5' ELSE '' END,
    CASE WHEN p_before IS NOT NULL THEN 'AND m."created_at" < $6' ELSE '' END,
    CASE WHEN p_owner_id IS NOT NULL THEN 'AND m."owner_id" = $7' ELSE '' END,
    -- "+ 0" hides the ordering from the index: an exact scan, for small scopes.
    CASE WHEN p_exact THEN '(c."embedding" <=> $1) + 0' ELSE 'c."embedding" <=> $1' END)
  USING p_query, p_hub_ids, p_kind, p_topic_id, p_after, p_before, p_owner_id, p_k, p_exact,
        coalesce(p_chunk_ids, '{}'::uuid[]), coalesce(p_memory_ids, '{}'::uuid[]),
        coalesce(p_entity_idx, '{}'::integer[]), coalesce(p_entity_lexemes, '{}'::text[]), p_entity_queries;
END
$fn$;

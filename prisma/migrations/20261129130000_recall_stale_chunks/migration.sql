-- A content edit (PATCH, a re-push of a source_path, a dream's merge or its undo) bumps the memory's
-- version and sends it back to processing, but its chunks stay those of the old version until the
-- index step replaces them. Recall matched and showed them meanwhile: text an edit took out (a
-- passphrase removed from a note) was still found by its words and returned as chunk_content, with
-- the new title. A memory whose processing is pending or running is now searched whole, by its
-- current text, as a memory not chunked yet is, and its stored chunks are neither matched (lexical
-- leg, vector leg) nor shown (entries: a chunk picked just before the edit committed gives way to
-- the memory's own opening). The index-change triggers already log the switch both ways.

CREATE OR REPLACE FUNCTION "engram_lexical_search"(
    "p_user_id" uuid, "p_hub_ids" uuid[], "p_text" text, "p_entities" text[],
    "p_kind" text, "p_topic_id" uuid, "p_after" timestamptz, "p_before" timestamptz, "p_owner_id" uuid,
    "p_max_terms" integer, "p_budget" double precision, "p_max_paired" integer,
    "p_max_candidates" integer, "p_max_unindexed" integer, "p_pre_ranked" integer, "p_rescored" integer,
    "p_k1" double precision, "p_b" double precision)
RETURNS TABLE ("hub_id" uuid, "term" text, "df" double precision, "idf" double precision, "n" double precision, "avgdl" double precision,
               "entity_idx" integer, "lexemes" text[],
               "chunk_id" uuid, "memory_id" uuid, "matched_idf" double precision, "matched_terms" text[], "bm25" double precision,
               "candidates" bigint)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
  filtered boolean := p_kind IS NOT NULL OR p_topic_id IS NOT NULL OR p_after IS NOT NULL OR p_before IS NOT NULL OR p_owner_id IS NOT NULL;
  hubs uuid[];
  v_n double precision;
  v_avgdl double precision;
  v_terms text[];
  v_dfs double precision[];
  v_idfs double precision[];
  v_select tsquery;
  v_pairs tsquery;
  v_all tsquery;
  v_pair tsquery;
  singles text[] := '{}';
  rest text[] := '{}';
  budget double precision := 0;
BEGIN
  IF p_user_id IS NULL THEN
    RAISE EXCEPTION 'engram_lexical_search: p_user_id is required' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT coalesce(array_agg(hm."hub_id" ORDER BY hm."joined_at", hm."hub_id"), '{}'::uuid[]) INTO hubs
  FROM "hub_members" hm
  WHERE hm."user_id" = p_user_id AND (p_hub_ids IS NULL OR hm."hub_id" = ANY(p_hub_ids));
  SELECT coalesce(sum(s."chunk_count"), 0)::double precision, coalesce(sum(s."total_length"), 0)::double precision INTO v_n, v_avgdl
  FROM "recall_hub_stats" s WHERE s."hub_id" = ANY(hubs);
  v_avgdl := CASE WHEN v_n > 0 THEN greatest(v_avgdl / v_n, 1) ELSE 1 END;
  RETURN QUERY SELECT h.id, NULL::text, NULL::double precision, NULL::double precision, v_n, v_avgdl,
                      NULL::integer, NULL::text[], NULL::uuid, NULL::uuid, NULL::double precision, NULL::text[], NULL::double precision, NULL::bigint
               FROM unnest(hubs) AS h(id);

  -- The query's terms (rarest first, at most p_max_terms: a pasted paragraph must not cost more)
  -- with their document frequency in these hubs and BM25 idf.
  SELECT coalesce(array_agg(x.term ORDER BY x.df, x.term), '{}'::text[]), coalesce(array_agg(x.df ORDER BY x.df, x.term), '{}'::double precision[])
  INTO v_terms, v_dfs
  FROM (SELECT t.term, coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = t.term), 0)::double precision AS df
        FROM unnest(tsvector_to_array("engram_tsvector"(p_text))) AS t(term)
        ORDER BY 2, 1 LIMIT p_max_terms) AS x;
  SELECT coalesce(array_agg(ln(1 + (greatest(v_n, d.df) - d.df + 0.5) / (d.df + 0.5)) ORDER BY d.i), '{}'::double precision[]) INTO v_idfs
  FROM unnest(v_dfs) WITH ORDINALITY AS d(df, i);
  RETURN QUERY SELECT NULL::uuid, t.term, t.df, t.idf, NULL::double precision, NULL::double precision, NULL::integer, NULL::text[],
                      NULL::uuid, NULL::uuid, NULL::double precision, NULL::text[], NULL::double precision, NULL::bigint
               FROM unnest(v_terms, v_dfs, v_idfs) AS t(term, df, idf);

  RETURN QUERY SELECT NULL::uuid, NULL::text,
                      coalesce((SELECT min(coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = l.lexeme), 0))
                                FROM unnest(x.lexemes) AS l(lexeme)), 0)::double precision,
                      NULL::double precision, NULL::double precision, NULL::double precision, e.idx::integer, x.lexemes,
                      NULL::uuid, NULL::uuid, NULL::double precision, NULL::text[], NULL::double precision, NULL::bigint
               FROM unnest(coalesce(p_entities, '{}'::text[])) WITH ORDINALITY AS e(text, idx),
                    LATERAL (SELECT tsvector_to_array("engram_tsvector"(e.text)) AS lexemes) AS x;

  IF cardinality(v_terms) = 0 THEN
    RETURN;
  END IF;

  -- Candidate selection, OR semantics: rare words select on their own until their postings fill the
  -- budget; the next p_max_paired commoner words select only documents holding two of them, so one
  -- common word never makes the query read half the index. Every term still counts in the score.
  FOR i IN 1 .. cardinality(v_terms) LOOP
    CONTINUE WHEN v_dfs[i] <= 0;
    IF cardinality(rest) = 0 AND (cardinality(singles) = 0 OR budget + v_dfs[i] <= p_budget) THEN
      singles := singles || v_terms[i];
      budget := budget + v_dfs[i];
    ELSIF cardinality(rest) < p_max_paired THEN
      rest := rest || v_terms[i];
    END IF;
  END LOOP;
  v_select := "engram_terms_tsquery"(singles, ' | ');
  FOR i IN 1 .. cardinality(rest) LOOP
    FOR j IN i + 1 .. cardinality(rest) LOOP
      v_pair := "engram_terms_tsquery"(ARRAY[rest[i]], '') && "engram_terms_tsquery"(ARRAY[rest[j]], '');
      v_pairs := CASE WHEN v_pairs IS NULL THEN v_pair ELSE v_pairs || v_pair END;
    END LOOP;
  END LOOP;
  -- Unchunked memories are matched on every term: words new to the hub are exactly what they may hold.
  v_all := "engram_terms_tsquery"(v_terms, ' | ');

    RETURN QUERY
    WITH q AS MATERIALIZED (
      SELECT t.term, t.idf, "engram_terms_tsquery"(ARRAY[t.term], ' | ') AS tsq FROM unnest(v_terms, v_idfs) AS t(term, idf)
    ), matched AS (
      -- Chunks holding a selecting word first, then chunks holding a selecting pair of commoner
      -- words; the cap truncates the weaker (pair) matches first.
      SELECT c."id" AS cid, c."memory_id" AS mid, c."search_vector" AS vec, greatest(c."search_length", 1) AS len
      FROM "chunks" c
      WHERE v_select IS NOT NULL AND c."search_vector" @@ v_select AND c."hub_id" = ANY(hubs)
      UNION ALL
      SELECT c."id", c."memory_id", c."search_vector", greatest(c."search_length", 1)
      FROM "chunks" c
      WHERE v_pairs IS NOT NULL AND c."search_vector" @@ v_pairs AND c."hub_id" = ANY(hubs)
        AND NOT (v_select IS NOT NULL AND c."search_vector" @@ v_select)
    ), cand AS MATERIALIZED (
      SELECT x.* FROM matched AS x
      -- A per-row primary-key probe (a join let the planner hash the whole memories table);
      -- without filters it is deferred to the ranked survivors below.
      WHERE NOT filtered OR (
             SELECT m."state" = 'active' AND m."hub_id" = ANY(hubs) AND m."processing_status" NOT IN ('pending', 'running')
                    AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
                    AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
                    AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
             FROM "memories" m WHERE m."id" = x.mid)
      LIMIT p_max_candidates
    ), mcand AS MATERIALIZED (
      -- Memories not chunked yet (read-your-writes) are matched whole, on every term.
      SELECT NULL::uuid AS cid, m."id" AS mid, m."search_vector" AS vec, greatest("engram_tsvector_length"(m."search_vector"), 1) AS len
      FROM "memories" m
      WHERE m."processing_status" IN ('pending', 'running') AND m."search_vector" @@ v_all
        AND m."hub_id" = ANY(hubs) AND m."state" = 'active'
        AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
        AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
        AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
      LIMIT p_max_unindexed
    ), pre AS (
      -- A cheap first cut (one ts_rank over every query word) before exact BM25 on the survivors.
      -- OFFSET 0 keeps the memory check above the sort, so it runs in rank order and stops at
      -- p_pre_ranked.
      SELECT a.cid, a.mid, a.vec, a.len
      FROM (SELECT r.* FROM (SELECT * FROM cand UNION ALL SELECT * FROM mcand) AS r
            ORDER BY ts_rank(r.vec, v_all, 1) DESC
            OFFSET 0) AS a
      WHERE filtered OR a.cid IS NULL
         OR (SELECT m."state" = 'active' AND m."hub_id" = ANY(hubs) AND m."processing_status" NOT IN ('pending', 'running')
             FROM "memories" m WHERE m."id" = a.mid)
      LIMIT p_pre_ranked
    ), scored AS (
      SELECT p.cid, p.mid, p.vec, p.len, s.matched_idf, s.matched_terms
      FROM pre AS p,
           LATERAL (SELECT coalesce(sum(q.idf), 0) AS matched_idf, array_agg(q.term) AS matched_terms FROM q WHERE p.vec @@ q.tsq) AS s
    ), top AS (
      SELECT * FROM scored ORDER BY scored.matched_idf / (1 - p_b + p_b * scored.len / v_avgdl) DESC LIMIT p_rescored
    )
    SELECT NULL::uuid, NULL::text, NULL::double precision, NULL::double precision, NULL::double precision, NULL::double precision,
           NULL::integer, NULL::text[],
           top.cid, top.mid, top.matched_idf::double precision, top.matched_terms,
           -- Exact term frequencies of the query's words only: keep just those lexemes (weight A) before unnesting.
           (SELECT sum(q.idf * x.tf * (p_k1 + 1) / (x.tf + p_k1 * (1 - p_b + p_b * top.len / v_avgdl)))
            FROM (SELECT u.lexeme, greatest(coalesce(array_length(u.positions, 1), 1), 1)::double precision AS tf
                  FROM unnest(ts_filter(setweight(top.vec, 'A', v_terms), '{a}')) AS u) AS x
            JOIN q ON q.term = x.lexeme)::double precision,
           (SELECT count(*) FROM cand) + (SELECT count(*) FROM mcand)
    FROM top;
END
$fn$;

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
        AND m."processing_status" NOT IN ('pending', 'running')
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
      WHERE $1 IS NOT NULL AND $8 > 0 AND c."hub_id" = ANY($2) AND c."embedding" IS NOT NULL AND m."state" = 'active'
        AND m."processing_status" NOT IN ('pending', 'running') %s %s %s %s %s
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

CREATE OR REPLACE FUNCTION "engram_recall_entries"("p_memory_ids" uuid[], "p_chunk_ids" uuid[], "p_excerpt" integer,
                                        "p_user_id" uuid, "p_hub_ids" uuid[])
RETURNS TABLE ("id" uuid, "title" text, "summary" text, "kind" text, "stability" text, "source" text, "created_at" timestamptz,
               "hub_id" uuid, "hub_name" text, "topic_id" uuid, "topic_name" text, "chunk_content" text, "heading_chain" text)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
BEGIN
  IF p_user_id IS NULL THEN
    RAISE EXCEPTION 'engram_recall_entries: p_user_id is required' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- Only hubs the caller belongs to, whatever the caller passed.
  p_hub_ids := ARRAY(SELECT hm."hub_id" FROM "hub_members" hm WHERE hm."user_id" = p_user_id AND hm."hub_id" = ANY(p_hub_ids));
  RETURN QUERY
  SELECT m."id", m."title"::text, m."summary"::text, m."kind"::text, m."stability"::text, m."source"::text, m."created_at"::timestamptz,
         m."hub_id", h."name"::text, m."topic_id", t."name"::text,
         CASE WHEN c."id" IS NULL THEN left(m."content", p_excerpt) ELSE c."content" END::text,
         coalesce(c."heading_chain", '')::text
  FROM unnest(p_memory_ids, p_chunk_ids) AS p(memory_id, chunk_id)
  JOIN "memories" m ON m."id" = p.memory_id AND m."hub_id" = ANY(p_hub_ids) AND m."state" = 'active'
  JOIN "hubs" h ON h."id" = m."hub_id"
  LEFT JOIN "topics" t ON t."id" = m."topic_id"
  -- A memory sent back to processing is shown by its current text, never by its old version's chunk.
  LEFT JOIN "chunks" c ON c."id" = p.chunk_id AND c."memory_id" = m."id" AND m."processing_status" NOT IN ('pending', 'running');
END
$fn$;

-- The lexical leg in one statement (one round trip, plans cached per session):
-- the hubs to search (the caller's memberships, intersected with those asked
-- for), the query analysed with the index's own analyser, document
-- frequencies and idf in those hubs, the candidate selection, and the search.
--
-- Candidates come in two tiers: chunks holding one of the query's rarer words
-- (within the postings budget) before chunks that only hold a pair of its
-- commoner words, so the candidate cap drops the weakest matches first (it
-- used to drop arbitrary ones, in table order). The first cut ranks with one
-- ts_rank over all query words. Documents are indexed without weights, so
-- setweight(.., 'A', terms) alone marks the query's words.
--
-- Rows come in four kinds, told apart by which columns are set:
--   hub:    hub_id, n and avgdl (chunks in all the hubs searched, their mean length)
--   term:   term, df, idf — the terms used, rarest first
--   entity: entity_idx, lexemes, df (of its rarest lexeme)
--   hit:    chunk_id (NULL: a memory matched whole before chunking), memory_id,
--           matched_idf, matched_terms, bm25, candidates
-- p_user_id NULL: p_hub_ids are taken as they are (the caller already scoped them).
DROP FUNCTION "engram_lexical_search"(text[], double precision[], tsquery, tsquery, double precision, uuid[], text, uuid,
    timestamptz, timestamptz, uuid, integer, integer, integer, integer, double precision, double precision);

CREATE FUNCTION "engram_lexical_search"(
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
    hubs := coalesce(p_hub_ids, '{}'::uuid[]);
  ELSE
    SELECT coalesce(array_agg(hm."hub_id" ORDER BY hm."joined_at", hm."hub_id"), '{}'::uuid[]) INTO hubs
    FROM "hub_members" hm
    WHERE hm."user_id" = p_user_id AND (p_hub_ids IS NULL OR hm."hub_id" = ANY(p_hub_ids));
  END IF;
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
             SELECT m."state" = 'active' AND m."hub_id" = ANY(hubs)
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
         OR (SELECT m."state" = 'active' AND m."hub_id" = ANY(hubs) FROM "memories" m WHERE m."id" = a.mid)
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

-- The lexical index's catch-up reads exactly what its previous catch-up could not see: changes of
-- transactions at or after that snapshot's xmax, or in progress then (its xip list). The first
-- version re-read everything from the snapshot's xmin, so one long transaction anywhere on the
-- server (a backup, in another database too) made every catch-up re-read a growing log, and past
-- 5,000 rows rebuild the index on every search.
DROP FUNCTION "engram_lexical_terms"(uuid, uuid[], text, text[], integer, xid8, integer);

CREATE FUNCTION "engram_lexical_terms"(
    "p_user_id" uuid, "p_hub_ids" uuid[], "p_text" text, "p_entities" text[], "p_max_terms" integer,
    "p_since_xmax" xid8, "p_since_xip" xid8[], "p_max_changes" integer)
RETURNS TABLE ("hub_id" uuid, "hub_chunks" double precision, "term" text, "df" double precision, "idf" double precision,
               "n" double precision, "avgdl" double precision, "entity_idx" integer, "lexemes" text[],
               "change_hub" uuid, "change_memory" uuid, "change_id" bigint, "change_xid" text,
               "snapshot_xmin" text, "snapshot_xmax" text, "snapshot_xip" text[], "horizon" text)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
  snap pg_snapshot := pg_current_snapshot();
  hubs uuid[];
  v_n double precision;
  v_avgdl double precision;
BEGIN
  IF p_user_id IS NULL THEN
    RAISE EXCEPTION 'engram_lexical_terms: p_user_id is required' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT coalesce(array_agg(hm."hub_id" ORDER BY hm."joined_at", hm."hub_id"), '{}'::uuid[]) INTO hubs
  FROM "hub_members" hm
  WHERE hm."user_id" = p_user_id AND (p_hub_ids IS NULL OR hm."hub_id" = ANY(p_hub_ids));
  SELECT coalesce(sum(s."chunk_count"), 0)::double precision, coalesce(sum(s."total_length"), 0)::double precision INTO v_n, v_avgdl
  FROM "recall_hub_stats" s WHERE s."hub_id" = ANY(hubs);
  v_avgdl := CASE WHEN v_n > 0 THEN greatest(v_avgdl / v_n, 1) ELSE 1 END;

  RETURN QUERY SELECT NULL::uuid, NULL::double precision, NULL::text, NULL::double precision, NULL::double precision, v_n, v_avgdl,
                      NULL::integer, NULL::text[], NULL::uuid, NULL::uuid, NULL::bigint, NULL::text,
                      pg_snapshot_xmin(snap)::text, pg_snapshot_xmax(snap)::text, ARRAY(SELECT x::text FROM pg_snapshot_xip(snap) AS x),
                      (SELECT h."xid"::text FROM "recall_index_horizon" h WHERE h."id" = 1);
  RETURN QUERY SELECT h.id, coalesce((SELECT s."chunk_count" FROM "recall_hub_stats" s WHERE s."hub_id" = h.id), 0)::double precision,
                      NULL::text, NULL::double precision, NULL::double precision, NULL::double precision, NULL::double precision,
                      NULL::integer, NULL::text[], NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text[], NULL::text
               FROM unnest(hubs) AS h(id);
  RETURN QUERY SELECT NULL::uuid, NULL::double precision, x.term, x.df, ln(1 + (greatest(v_n, x.df) - x.df + 0.5) / (x.df + 0.5)),
                      NULL::double precision, NULL::double precision, NULL::integer, NULL::text[],
                      NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text[], NULL::text
               FROM (SELECT t.term, coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = t.term), 0)::double precision AS df
                     FROM unnest(tsvector_to_array("engram_tsvector"(p_text))) AS t(term)
                     ORDER BY 2, 1 LIMIT p_max_terms) AS x
               ORDER BY x.df, x.term;
  RETURN QUERY SELECT NULL::uuid, NULL::double precision, NULL::text,
                      coalesce((SELECT min(coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = l.lexeme), 0))
                                FROM unnest(x.lexemes) AS l(lexeme)), 0)::double precision,
                      NULL::double precision, NULL::double precision, NULL::double precision, e.idx::integer, x.lexemes,
                      NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text[], NULL::text
               FROM unnest(coalesce(p_entities, '{}'::text[])) WITH ORDINALITY AS e(text, idx),
                    LATERAL (SELECT tsvector_to_array("engram_tsvector"(e.text)) AS lexemes) AS x;
  IF p_since_xmax IS NOT NULL THEN
    RETURN QUERY SELECT NULL::uuid, NULL::double precision, NULL::text, NULL::double precision, NULL::double precision,
                        NULL::double precision, NULL::double precision, NULL::integer, NULL::text[],
                        c."hub_id", c."memory_id", c."id", c."xid"::text, NULL::text, NULL::text, NULL::text[], NULL::text
                 FROM "recall_index_changes" c WHERE c."xid" >= p_since_xmax OR c."xid" = ANY(p_since_xip)
                 ORDER BY c."id" LIMIT p_max_changes;
  END IF;
END
$fn$;

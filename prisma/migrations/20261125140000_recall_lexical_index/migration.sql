-- Issue 10 (latency): each server process keeps an in-memory inverted index of
-- the lexical leg (lib/recall/lexical-index.ts). It stays coherent across
-- processes through this change log: every write that changes what the lexical
-- leg can match appends (hub, memory, writing transaction). A process re-reads
-- the rows of transactions at or after the xmin of its last catch-up's snapshot
-- and reloads those memories, so a transaction that commits late is never
-- missed; reloading twice is harmless.
CREATE TABLE "recall_index_changes" (
    "id" BIGINT GENERATED ALWAYS AS IDENTITY,
    "hub_id" UUID NOT NULL,
    "memory_id" UUID NOT NULL,
    "xid" xid8 NOT NULL DEFAULT pg_current_xact_id(),
    "at" TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT "recall_index_changes_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "recall_index_changes_xid_idx" ON "recall_index_changes" ("xid");

-- Pruning the log (or a TRUNCATE) raises the horizon: a process whose last
-- catch-up is not past it may have missed rows and rebuilds its index.
CREATE TABLE "recall_index_horizon" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "xid" xid8 NOT NULL,
    CONSTRAINT "recall_index_horizon_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "recall_index_horizon_one_row" CHECK ("id" = 1)
);
INSERT INTO "recall_index_horizon" ("id", "xid") VALUES (1, pg_current_xact_id());

CREATE FUNCTION "engram_index_new_chunks"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") SELECT DISTINCT n."hub_id", n."memory_id" FROM "engram_new_rows" AS n;
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_index_old_chunks"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") SELECT DISTINCT o."hub_id", o."memory_id" FROM "engram_old_rows" AS o;
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_index_new_memories"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") SELECT n."hub_id", n."id" FROM "engram_new_rows" AS n;
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_index_old_memories"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") SELECT o."hub_id", o."id" FROM "engram_old_rows" AS o;
  RETURN NULL;
END
$$;

-- A row moved between hubs is logged under both.
CREATE FUNCTION "engram_index_changed_chunk"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") VALUES (NEW."hub_id", NEW."memory_id");
  IF OLD."hub_id" IS DISTINCT FROM NEW."hub_id" OR OLD."memory_id" IS DISTINCT FROM NEW."memory_id" THEN
    INSERT INTO "recall_index_changes" ("hub_id", "memory_id") VALUES (OLD."hub_id", OLD."memory_id");
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_index_changed_memory"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "recall_index_changes" ("hub_id", "memory_id") VALUES (NEW."hub_id", NEW."id");
  IF OLD."hub_id" IS DISTINCT FROM NEW."hub_id" THEN
    INSERT INTO "recall_index_changes" ("hub_id", "memory_id") VALUES (OLD."hub_id", NEW."id");
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_index_truncated"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "recall_index_horizon" SET "xid" = pg_current_xact_id() WHERE "id" = 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER "chunks_index_insert_trg"
AFTER INSERT ON "chunks" REFERENCING NEW TABLE AS "engram_new_rows"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_new_chunks"();
CREATE TRIGGER "chunks_index_delete_trg"
AFTER DELETE ON "chunks" REFERENCING OLD TABLE AS "engram_old_rows"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_old_chunks"();
CREATE TRIGGER "chunks_index_update_trg"
AFTER UPDATE OF "hub_id", "memory_id", "search_vector", "search_length" ON "chunks"
FOR EACH ROW WHEN (OLD."hub_id" IS DISTINCT FROM NEW."hub_id" OR OLD."memory_id" IS DISTINCT FROM NEW."memory_id"
                   OR OLD."search_length" IS DISTINCT FROM NEW."search_length" OR OLD."search_vector" IS DISTINCT FROM NEW."search_vector")
EXECUTE FUNCTION "engram_index_changed_chunk"();

CREATE TRIGGER "memories_index_insert_trg"
AFTER INSERT ON "memories" REFERENCING NEW TABLE AS "engram_new_rows"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_new_memories"();
CREATE TRIGGER "memories_index_delete_trg"
AFTER DELETE ON "memories" REFERENCING OLD TABLE AS "engram_old_rows"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_old_memories"();
-- Only what the index holds: the state, the hub, whether the memory is searched whole
-- (not chunked yet) and its text. Access counters and the like never fire this.
CREATE TRIGGER "memories_index_update_trg"
AFTER UPDATE OF "state", "hub_id", "processing_status", "title", "content", "search_vector" ON "memories"
FOR EACH ROW WHEN (OLD."state" IS DISTINCT FROM NEW."state" OR OLD."hub_id" IS DISTINCT FROM NEW."hub_id"
                   OR (OLD."processing_status" IN ('pending', 'running')) IS DISTINCT FROM (NEW."processing_status" IN ('pending', 'running'))
                   OR OLD."search_vector" IS DISTINCT FROM NEW."search_vector")
EXECUTE FUNCTION "engram_index_changed_memory"();

CREATE TRIGGER "chunks_index_truncate_trg" AFTER TRUNCATE ON "chunks" FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_truncated"();
CREATE TRIGGER "memories_index_truncate_trg" AFTER TRUNCATE ON "memories" FOR EACH STATEMENT EXECUTE FUNCTION "engram_index_truncated"();

-- The lexical leg's statistics without the search (the in-process index searches):
-- the caller's hubs with their chunk counts, the query's terms (rarest first) with df
-- and idf, the entities' rarest df, and the index changes since p_since with the
-- snapshot's xmin and the horizon. Same rules as engram_lexical_search.
CREATE FUNCTION "engram_lexical_terms"(
    "p_user_id" uuid, "p_hub_ids" uuid[], "p_text" text, "p_entities" text[], "p_max_terms" integer,
    "p_since" xid8, "p_max_changes" integer)
RETURNS TABLE ("hub_id" uuid, "hub_chunks" double precision, "term" text, "df" double precision, "idf" double precision,
               "n" double precision, "avgdl" double precision, "entity_idx" integer, "lexemes" text[],
               "change_hub" uuid, "change_memory" uuid, "change_id" bigint, "change_xid" text,
               "snapshot_xmin" text, "horizon" text)
LANGUAGE plpgsql STABLE
AS $fn$
#variable_conflict use_column
DECLARE
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
                      pg_snapshot_xmin(pg_current_snapshot())::text, (SELECT h."xid"::text FROM "recall_index_horizon" h WHERE h."id" = 1);
  RETURN QUERY SELECT h.id, coalesce((SELECT s."chunk_count" FROM "recall_hub_stats" s WHERE s."hub_id" = h.id), 0)::double precision,
                      NULL::text, NULL::double precision, NULL::double precision, NULL::double precision, NULL::double precision,
                      NULL::integer, NULL::text[], NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text
               FROM unnest(hubs) AS h(id);
  RETURN QUERY SELECT NULL::uuid, NULL::double precision, x.term, x.df, ln(1 + (greatest(v_n, x.df) - x.df + 0.5) / (x.df + 0.5)),
                      NULL::double precision, NULL::double precision, NULL::integer, NULL::text[],
                      NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text
               FROM (SELECT t.term, coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = t.term), 0)::double precision AS df
                     FROM unnest(tsvector_to_array("engram_tsvector"(p_text))) AS t(term)
                     ORDER BY 2, 1 LIMIT p_max_terms) AS x
               ORDER BY x.df, x.term;
  RETURN QUERY SELECT NULL::uuid, NULL::double precision, NULL::text,
                      coalesce((SELECT min(coalesce((SELECT sum(s."df") FROM "recall_term_stats" s WHERE s."hub_id" = ANY(hubs) AND s."term" = l.lexeme), 0))
                                FROM unnest(x.lexemes) AS l(lexeme)), 0)::double precision,
                      NULL::double precision, NULL::double precision, NULL::double precision, e.idx::integer, x.lexemes,
                      NULL::uuid, NULL::uuid, NULL::bigint, NULL::text, NULL::text, NULL::text
               FROM unnest(coalesce(p_entities, '{}'::text[])) WITH ORDINALITY AS e(text, idx),
                    LATERAL (SELECT tsvector_to_array("engram_tsvector"(e.text)) AS lexemes) AS x;
  IF p_since IS NOT NULL THEN
    RETURN QUERY SELECT NULL::uuid, NULL::double precision, NULL::text, NULL::double precision, NULL::double precision,
                        NULL::double precision, NULL::double precision, NULL::integer, NULL::text[],
                        c."hub_id", c."memory_id", c."id", c."xid"::text, NULL::text, NULL::text
                 FROM "recall_index_changes" c WHERE c."xid" >= p_since
                 ORDER BY c."id" LIMIT p_max_changes;
  END IF;
END
$fn$;

-- Recall: one text analyser shared by documents and queries, BM25 statistics
-- kept per hub, and read-your-writes lexical search on memories.

-- Languages written without spaces (Chinese, Japanese; Korean particles too)
-- have no word boundaries the parser can see: index overlapping character
-- bigrams, and the same bigrams at query time.
CREATE FUNCTION "engram_cjk_bigrams"("doc" text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(CASE WHEN char_length(r.run) = 1 THEN r.run ELSE substr(r.run, g.i, 2) END, ' '), '')
  FROM (SELECT m[1] AS run FROM regexp_matches("doc", '([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)', 'g') AS m) AS r,
       LATERAL generate_series(1, greatest(char_length(r.run) - 1, 1)) AS g(i)
$$;

-- Identifiers (ERR_CONN_RESET, docker-compose.yml, getUserById) are split by
-- the parser; add each one joined (errconnreset) so an exact identifier
-- outranks documents that merely share its parts, and camelCase parts so
-- "user by id" finds getUserById.
CREATE FUNCTION "engram_identifier_terms"("doc" text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(string_agg(
           lower(regexp_replace(t.tok, '[^A-Za-z0-9]', '', 'g'))
           || CASE WHEN t.tok ~ '[a-z][A-Z]' THEN ' ' || lower(regexp_replace(t.tok, '([a-z0-9])([A-Z])', '\1 \2', 'g')) ELSE '' END,
           ' '), '')
  FROM (SELECT m[1] AS tok FROM regexp_matches("doc", '([A-Za-z0-9]+(?:[_.:/-]+[A-Za-z0-9]+)+|[A-Za-z0-9]*[a-z][A-Z][A-Za-z0-9]*)', 'g') AS m) AS t
$$;

-- The analyser: English stems (stop words dropped) over the non-CJK text,
-- plus joined identifiers and CJK bigrams.
CREATE FUNCTION "engram_tsvector"("doc" text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_tsvector('english'::regconfig, regexp_replace("doc", '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+', ' ', 'g'))
      || to_tsvector('simple'::regconfig, "engram_identifier_terms"("doc"))
      || to_tsvector('simple'::regconfig, "engram_cjk_bigrams"("doc"))
$$;

-- Token count of a document (BM25's document length).
CREATE FUNCTION "engram_tsvector_length"("vec" tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(sum(greatest(coalesce(array_length(u.positions, 1), 1), 1)), 0)::integer FROM unnest("vec") AS u
$$;

-- A tsvector holds at most 1 MB of lexemes: index the head of very large
-- content rather than ever failing a write.
CREATE FUNCTION "engram_document_tsvector"("doc" text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN "engram_tsvector"(left("doc", 200000));
EXCEPTION WHEN program_limit_exceeded THEN
  RETURN "engram_tsvector"(left("doc", 20000));
END
$$;

ALTER TABLE "chunks" ADD COLUMN "search_length" INTEGER NOT NULL DEFAULT 0;

-- A memory is lexically searchable the moment its create commits, before
-- background processing has chunked it.
CREATE FUNCTION "engram_memories_search_vector"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW."search_vector" := "engram_document_tsvector"(NEW."title" || E'\n' || NEW."content");
  RETURN NEW;
END
$$;

CREATE TRIGGER "memories_search_vector_trg"
BEFORE INSERT OR UPDATE OF "title", "content" ON "memories"
FOR EACH ROW EXECUTE FUNCTION "engram_memories_search_vector"();

-- BM25 statistics per hub, so a caller's scores depend only on hubs they
-- can read. Maintained by statement triggers on chunks (any writer).
CREATE TABLE "recall_term_stats" (
    "hub_id" UUID NOT NULL,
    "term" TEXT NOT NULL,
    "df" INTEGER NOT NULL,

    CONSTRAINT "recall_term_stats_pkey" PRIMARY KEY ("hub_id", "term")
);

CREATE TABLE "recall_hub_stats" (
    "hub_id" UUID NOT NULL,
    "chunk_count" INTEGER NOT NULL DEFAULT 0,
    "total_length" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "recall_hub_stats_pkey" PRIMARY KEY ("hub_id")
);

ALTER TABLE "recall_term_stats" ADD CONSTRAINT "recall_term_stats_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "recall_hub_stats" ADD CONSTRAINT "recall_hub_stats_hub_id_fkey" FOREIGN KEY ("hub_id") REFERENCES "hubs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE FUNCTION "engram_chunk_stats_add"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  -- Sorted so concurrent writers lock rows in the same order (no deadlocks).
  INSERT INTO "recall_term_stats" ("hub_id", "term", "df")
  SELECT n."hub_id", u.lexeme, count(*)::integer
  FROM "engram_new_chunks" AS n, unnest(n."search_vector") AS u
  WHERE n."search_vector" IS NOT NULL AND EXISTS (SELECT 1 FROM "hubs" h WHERE h."id" = n."hub_id")
  GROUP BY n."hub_id", u.lexeme
  ORDER BY n."hub_id", u.lexeme
  ON CONFLICT ("hub_id", "term") DO UPDATE SET "df" = "recall_term_stats"."df" + EXCLUDED."df";

  INSERT INTO "recall_hub_stats" ("hub_id", "chunk_count", "total_length")
  SELECT n."hub_id", count(*)::integer, sum(n."search_length")
  FROM "engram_new_chunks" AS n
  WHERE EXISTS (SELECT 1 FROM "hubs" h WHERE h."id" = n."hub_id")
  GROUP BY n."hub_id"
  ORDER BY n."hub_id"
  ON CONFLICT ("hub_id") DO UPDATE SET
    "chunk_count" = "recall_hub_stats"."chunk_count" + EXCLUDED."chunk_count",
    "total_length" = "recall_hub_stats"."total_length" + EXCLUDED."total_length";
  RETURN NULL;
END
$$;

CREATE FUNCTION "engram_chunk_stats_remove"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  WITH gone AS (
    SELECT o."hub_id", u.lexeme AS term, count(*)::integer AS df
    FROM "engram_old_chunks" AS o, unnest(o."search_vector") AS u
    WHERE o."search_vector" IS NOT NULL
    GROUP BY o."hub_id", u.lexeme
    ORDER BY o."hub_id", u.lexeme
  )
  UPDATE "recall_term_stats" AS s SET "df" = s."df" - gone.df
  FROM gone WHERE s."hub_id" = gone."hub_id" AND s."term" = gone.term;

  DELETE FROM "recall_term_stats" AS s
  USING (SELECT DISTINCT o."hub_id" FROM "engram_old_chunks" AS o) AS h
  WHERE s."hub_id" = h."hub_id" AND s."df" <= 0;

  UPDATE "recall_hub_stats" AS s SET
    "chunk_count" = greatest(s."chunk_count" - gone.n, 0),
    "total_length" = greatest(s."total_length" - gone.len, 0)
  FROM (SELECT o."hub_id", count(*)::integer AS n, sum(o."search_length") AS len FROM "engram_old_chunks" AS o GROUP BY o."hub_id") AS gone
  WHERE s."hub_id" = gone."hub_id";
  RETURN NULL;
END
$$;

CREATE TRIGGER "chunks_stats_insert_trg"
AFTER INSERT ON "chunks" REFERENCING NEW TABLE AS "engram_new_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_add"();

CREATE TRIGGER "chunks_stats_delete_trg"
AFTER DELETE ON "chunks" REFERENCING OLD TABLE AS "engram_old_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_remove"();

-- Moving memories between hubs moves their chunks' statistics too.
CREATE TRIGGER "chunks_stats_update_remove_trg"
AFTER UPDATE ON "chunks" REFERENCING OLD TABLE AS "engram_old_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_remove"();

CREATE TRIGGER "chunks_stats_update_add_trg"
AFTER UPDATE ON "chunks" REFERENCING NEW TABLE AS "engram_new_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_add"();

-- Backfill whatever existed before this migration.
UPDATE "memories" SET "search_vector" = "engram_document_tsvector"("title" || E'\n' || "content");
UPDATE "chunks" AS c SET
  "search_vector" = "engram_document_tsvector"(m."title" || E'\n' || c."heading_chain" || E'\n' || c."content")
FROM "memories" AS m WHERE m."id" = c."memory_id";
UPDATE "chunks" SET "search_length" = "engram_tsvector_length"("search_vector") WHERE "search_vector" IS NOT NULL;

-- Memories not yet (re)indexed into chunks are searched whole; only they need this index.
CREATE INDEX "memories_search_vector_unindexed_idx" ON "memories" USING GIN ("search_vector") WHERE "processing_status" IN ('pending', 'running');

-- A tsquery from already-analysed lexemes, joined with `op` (' | ' or ' & ').
CREATE FUNCTION "engram_terms_tsquery"("terms" text[], "op" text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(string_agg('''' || replace(replace(t, '\', '\\'), '''', '''''') || '''', "op"), '')::tsquery
  FROM unnest("terms") AS t
$$;

-- Nearest chunks by cosine within the caller's hubs and filters. Filtering
-- after an HNSW scan starves results, so the scan is iterative (pgvector
-- >= 0.8) with a wider beam; small scopes are scanned exactly instead.
CREATE FUNCTION "engram_vector_search"(
    "p_query" vector, "p_hub_ids" uuid[], "p_kind" text, "p_topic_id" uuid,
    "p_after" timestamptz, "p_before" timestamptz, "p_owner_id" uuid, "p_k" integer, "p_exact" boolean)
RETURNS TABLE ("chunk_id" uuid, "memory_id" uuid, "similarity" double precision)
LANGUAGE plpgsql STABLE
SET "hnsw.ef_search" = '100'
SET "hnsw.iterative_scan" = 'relaxed_order'
SET "hnsw.max_scan_tuples" = '40000'
AS $$
#variable_conflict use_column
BEGIN
  IF p_exact THEN
    RETURN QUERY
    SELECT c."id", c."memory_id", 1 - (c."embedding" <=> p_query)
    FROM "chunks" c JOIN "memories" m ON m."id" = c."memory_id"
    WHERE c."hub_id" = ANY(p_hub_ids) AND c."embedding" IS NOT NULL AND m."state" = 'active'
      AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
      AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
      AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
    ORDER BY (c."embedding" <=> p_query) + 0
    LIMIT p_k;
  ELSE
    RETURN QUERY
    WITH hits AS MATERIALIZED (
      SELECT c."id" AS cid, c."memory_id" AS mid, c."embedding" <=> p_query AS distance
      FROM "chunks" c JOIN "memories" m ON m."id" = c."memory_id"
      WHERE c."hub_id" = ANY(p_hub_ids) AND c."embedding" IS NOT NULL AND m."state" = 'active'
        AND (p_kind IS NULL OR m."kind" = p_kind) AND (p_topic_id IS NULL OR m."topic_id" = p_topic_id)
        AND (p_after IS NULL OR m."created_at" >= p_after) AND (p_before IS NULL OR m."created_at" < p_before)
        AND (p_owner_id IS NULL OR m."owner_id" = p_owner_id)
      ORDER BY c."embedding" <=> p_query
      LIMIT p_k
    )
    SELECT hits.cid, hits.mid, 1 - hits.distance FROM hits ORDER BY hits.distance;
  END IF;
END
$$;

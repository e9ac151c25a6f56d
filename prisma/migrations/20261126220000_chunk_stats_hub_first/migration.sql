-- Chunk writes take their hubs' statistics rows first (sorted by hub), before any term's row, and
-- hold them to commit: within a hub they are the lock every writer takes first. Before, a transaction
-- that replaced a memory's chunks ran two passes, the old chunks' terms (in its join's order) and then
-- the new chunks' terms (sorted). Two memories re-processed at once in one hub, each taking terms the
-- other had just given up, deadlocked: 13 of 80 such transactions on PostgreSQL
-- (tests/races.test.ts). A first processing (no old chunks) still reaches them only after its insert,
-- so the HNSW work of new memories in one hub is not serialised; a re-processing holds them from its
-- delete on. The bodies are those of 20261122100000_recall_lexical with the first statement added.

CREATE OR REPLACE FUNCTION "engram_chunk_stats_add"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "recall_hub_stats" AS s WHERE s."hub_id" IN (SELECT n."hub_id" FROM "engram_new_chunks" AS n) ORDER BY s."hub_id" FOR UPDATE;
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

CREATE OR REPLACE FUNCTION "engram_chunk_stats_remove"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "recall_hub_stats" AS s WHERE s."hub_id" IN (SELECT o."hub_id" FROM "engram_old_chunks" AS o) ORDER BY s."hub_id" FOR UPDATE;
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

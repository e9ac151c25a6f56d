-- Chunk writes take their hubs' statistics rows first (sorted by hub), before any term's row, and
-- hold them to commit: within a hub they are the lock every chunk writer takes first. Before, a
-- transaction that replaced a memory's chunks ran two passes, the old chunks' terms (in its join's
-- order) and then the new chunks' terms (sorted). Two memories re-processed at once in one hub, each
-- taking terms the other had just given up, deadlocked: 13 of 80 such transactions on PostgreSQL
-- (tests/races.test.ts). A first processing (no old chunks) still reaches them only after its insert,
-- so the HNSW work of new memories in one hub is not serialised; a re-processing holds them from its
-- delete on.
--
-- A trigger of its own rather than a change to the statistics functions: statement triggers of one
-- event fire in the order of their names, and "chunks_stats_0_lock_…" comes before the statistics'
-- "chunks_stats_delete_trg", "…_insert_trg" and "…_update_add_trg" / "…_update_remove_trg".
CREATE FUNCTION "engram_chunk_stats_lock_hubs"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM 1 FROM "recall_hub_stats" AS s WHERE s."hub_id" IN (SELECT n."hub_id" FROM "engram_new_chunks" AS n) ORDER BY s."hub_id" FOR UPDATE;
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM 1 FROM "recall_hub_stats" AS s WHERE s."hub_id" IN (SELECT o."hub_id" FROM "engram_old_chunks" AS o) ORDER BY s."hub_id" FOR UPDATE;
  ELSE
    -- A move between hubs: the hubs it leaves and the hubs it enters, in one sorted pass.
    PERFORM 1 FROM "recall_hub_stats" AS s
    WHERE s."hub_id" IN (SELECT n."hub_id" FROM "engram_new_chunks" AS n UNION SELECT o."hub_id" FROM "engram_old_chunks" AS o)
    ORDER BY s."hub_id" FOR UPDATE;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "chunks_stats_0_lock_insert_trg"
AFTER INSERT ON "chunks" REFERENCING NEW TABLE AS "engram_new_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_lock_hubs"();

CREATE TRIGGER "chunks_stats_0_lock_delete_trg"
AFTER DELETE ON "chunks" REFERENCING OLD TABLE AS "engram_old_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_lock_hubs"();

CREATE TRIGGER "chunks_stats_0_lock_update_trg"
AFTER UPDATE ON "chunks" REFERENCING OLD TABLE AS "engram_old_chunks" NEW TABLE AS "engram_new_chunks"
FOR EACH STATEMENT EXECUTE FUNCTION "engram_chunk_stats_lock_hubs"();

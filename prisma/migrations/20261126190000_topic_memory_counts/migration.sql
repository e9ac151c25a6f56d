-- Memories per topic (scope 'topic', scope_id = topic) and a hub's memories without a topic (scope
-- 'inbox', scope_id = hub) join the storage_usage counters, so topic lists and hub summaries read a few
-- rows instead of grouping every memory of the hub (21 ms for a 2,000-memory hub on the embedded
-- database, growing with the hub).
--
-- The counters are now taken in one global order: a change adds up per counter and applies them in
-- one INSERT sorted by (scope, scope_id), so the hub rows come before the owner rows. Before, each row
-- locked its owner's counter, then its hub's: two batch moves between the same two hubs, of memories of
-- two owners in opposite orders, deadlocked (tests/races.test.ts).
DROP TRIGGER "memories_storage_usage_insert_delete" ON "memories";
DROP TRIGGER "memories_storage_usage_update" ON "memories";
DROP FUNCTION "engram_memories_storage_usage"();

CREATE TYPE "engram_usage_change" AS ("sign" integer, "owner_id" uuid, "hub_id" uuid, "topic_id" uuid, "bytes" bigint);

CREATE FUNCTION "engram_storage_usage_shift"("p_changes" "engram_usage_change"[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
  SELECT k."scope", k."scope_id", sum(c."sign" * c."bytes"), sum(c."sign")
  FROM unnest("p_changes") AS c
  CROSS JOIN LATERAL (VALUES
    ('user', c."owner_id"),
    ('hub', c."hub_id"),
    (CASE WHEN c."topic_id" IS NULL THEN 'inbox' ELSE 'topic' END, coalesce(c."topic_id", c."hub_id"))
  ) AS k("scope", "scope_id")
  -- A deleted topic keeps no counter (see the topics trigger below), whichever trigger runs first.
  WHERE k."scope" <> 'topic' OR EXISTS (SELECT FROM "topics" t WHERE t."id" = k."scope_id")
  GROUP BY k."scope", k."scope_id"
  -- A counter whose sums are zero is not written, except the hub's: its lock, taken first, orders every
  -- change in the hub. Without it a move between two topics locked only those two, and two batch moves
  -- taking memories from two topics in opposite orders into a third deadlocked (tests/races.test.ts).
  HAVING sum(c."sign" * c."bytes") <> 0 OR sum(c."sign") <> 0 OR k."scope" = 'hub'
  ORDER BY k."scope", k."scope_id"
  ON CONFLICT ("scope", "scope_id") DO UPDATE
    SET "bytes" = u."bytes" + EXCLUDED."bytes", "memories" = u."memories" + EXCLUDED."memories"
$$;

CREATE FUNCTION "engram_memories_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- One new row (our code inserts memories one at a time): its counters already in the global order.
    PERFORM "engram_storage_usage_add"('hub', NEW."hub_id", octet_length(NEW."content"), 1);
    PERFORM "engram_storage_usage_add"(CASE WHEN NEW."topic_id" IS NULL THEN 'inbox' ELSE 'topic' END, coalesce(NEW."topic_id", NEW."hub_id"),
      octet_length(NEW."content"), 1);
    PERFORM "engram_storage_usage_add"('user', NEW."owner_id", octet_length(NEW."content"), 1);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM "engram_storage_usage_shift"(ARRAY(
      SELECT ROW(-1, o."owner_id", o."hub_id", o."topic_id", octet_length(o."content"))::"engram_usage_change" FROM "old_rows" o));
  ELSE
    PERFORM "engram_storage_usage_shift"(ARRAY[
      ROW(-1, OLD."owner_id", OLD."hub_id", OLD."topic_id", octet_length(OLD."content"))::"engram_usage_change",
      ROW(1, NEW."owner_id", NEW."hub_id", NEW."topic_id", octet_length(NEW."content"))::"engram_usage_change"]);
  END IF;
  RETURN NULL;
END
$$;

-- Deletes are statement-level: a batch delete removes memories of several hubs and owners at once, and
-- takes all their counters in one sorted pass. Inserts and updates stay row-level: a statement-level
-- update trigger cannot name columns (with transition tables), so it would run on every UPDATE of
-- memories, the pipeline's status changes and recall's access counts included (+0.3 ms each), where
-- this one runs only when a counted column changed. Each row takes its counters in the global order
-- (hubs first), and our code changes hubs and owners one memory per statement.
CREATE TRIGGER "memories_storage_usage_insert" AFTER INSERT ON "memories"
FOR EACH ROW EXECUTE FUNCTION "engram_memories_storage_usage"();
CREATE TRIGGER "memories_storage_usage_delete" AFTER DELETE ON "memories"
REFERENCING OLD TABLE AS "old_rows" FOR EACH STATEMENT EXECUTE FUNCTION "engram_memories_storage_usage"();
CREATE TRIGGER "memories_storage_usage_update" AFTER UPDATE OF "content", "hub_id", "owner_id", "topic_id" ON "memories"
FOR EACH ROW WHEN (OLD."content" IS DISTINCT FROM NEW."content" OR OLD."hub_id" IS DISTINCT FROM NEW."hub_id"
  OR OLD."owner_id" IS DISTINCT FROM NEW."owner_id" OR OLD."topic_id" IS DISTINCT FROM NEW."topic_id")
EXECUTE FUNCTION "engram_memories_storage_usage"();

-- A deleted topic's counter goes with it. The foreign key's ON DELETE SET NULL moves its memories to the
-- inbox; the counter shifts of that UPDATE are queued behind this trigger, and count the memories into
-- the inbox while skipping the topic, which no longer exists (the EXISTS above).
CREATE FUNCTION "engram_topics_storage_usage_delete"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "storage_usage" WHERE "scope" = 'topic' AND "scope_id" IN (SELECT o."id" FROM "old_rows" o);
  RETURN NULL;
END
$$;
CREATE TRIGGER "topics_storage_usage_delete" AFTER DELETE ON "topics"
REFERENCING OLD TABLE AS "old_rows" FOR EACH STATEMENT EXECUTE FUNCTION "engram_topics_storage_usage_delete"();

INSERT INTO "storage_usage" ("scope", "scope_id", "bytes", "memories")
SELECT 'topic', "topic_id", sum(octet_length("content")), count(*) FROM "memories" WHERE "topic_id" IS NOT NULL GROUP BY "topic_id";
INSERT INTO "storage_usage" ("scope", "scope_id", "bytes", "memories")
SELECT 'inbox', "hub_id", sum(octet_length("content")), count(*) FROM "memories" WHERE "topic_id" IS NULL GROUP BY "hub_id";

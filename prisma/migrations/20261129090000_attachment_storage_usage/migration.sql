-- Attachments join the storage quotas. /v1/usage reported a user's storage_bytes as memory text plus
-- attachment bytes, but the counters the quota checks read held only the text: a user's reported
-- figure could pass storage_bytes_limit with nothing refused, and files had no quota at all.
--
-- Each memory carries the bytes of its attachments (kept by a trigger on attachments), and the
-- memories triggers count them with its text. So the counters follow every way a memory moves (hub,
-- topic, owner) or goes (a delete, a hub's cascade) with nothing more to keep in step, and an attach
-- takes the counters in the global order through its memory's row, as every other change does. A
-- cascaded delete of attachments finds its memory already gone (its UPDATE matches nothing): the
-- memories delete trigger has subtracted the memory's attachment_bytes with the rest.
--
-- BIGINT, and the text's octet_length cast to it before the sum: a file may be up to 2147483647
-- bytes (ENGRAM_UPLOAD_MAX_BYTES), and integer + integer overflowed before any cast, so every UPDATE
-- and the DELETE of such a memory failed for good.
ALTER TABLE "memories" ADD COLUMN "attachment_bytes" BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION "engram_memories_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- One new row (our code inserts memories one at a time): its counters already in the global order.
    PERFORM "engram_storage_usage_add"('hub', NEW."hub_id", octet_length(NEW."content")::bigint + NEW."attachment_bytes", 1);
    PERFORM "engram_storage_usage_add"(CASE WHEN NEW."topic_id" IS NULL THEN 'inbox' ELSE 'topic' END, coalesce(NEW."topic_id", NEW."hub_id"),
      octet_length(NEW."content")::bigint + NEW."attachment_bytes", 1);
    PERFORM "engram_storage_usage_add"('user', NEW."owner_id", octet_length(NEW."content")::bigint + NEW."attachment_bytes", 1);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM "engram_storage_usage_shift"(ARRAY(
      SELECT ROW(-1, o."owner_id", o."hub_id", o."topic_id", octet_length(o."content")::bigint + o."attachment_bytes")::"engram_usage_change" FROM "old_rows" o));
  ELSE
    PERFORM "engram_storage_usage_shift"(ARRAY[
      ROW(-1, OLD."owner_id", OLD."hub_id", OLD."topic_id", octet_length(OLD."content")::bigint + OLD."attachment_bytes")::"engram_usage_change",
      ROW(1, NEW."owner_id", NEW."hub_id", NEW."topic_id", octet_length(NEW."content")::bigint + NEW."attachment_bytes")::"engram_usage_change"]);
  END IF;
  RETURN NULL;
END
$$;

DROP TRIGGER "memories_storage_usage_update" ON "memories";
CREATE TRIGGER "memories_storage_usage_update" AFTER UPDATE OF "content", "hub_id", "owner_id", "topic_id", "attachment_bytes" ON "memories"
FOR EACH ROW WHEN (OLD."content" IS DISTINCT FROM NEW."content" OR OLD."hub_id" IS DISTINCT FROM NEW."hub_id"
  OR OLD."owner_id" IS DISTINCT FROM NEW."owner_id" OR OLD."topic_id" IS DISTINCT FROM NEW."topic_id"
  OR OLD."attachment_bytes" IS DISTINCT FROM NEW."attachment_bytes")
EXECUTE FUNCTION "engram_memories_storage_usage"();

CREATE FUNCTION "engram_attachments_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE "memories" SET "attachment_bytes" = "attachment_bytes" - OLD."size_bytes" WHERE "id" = OLD."memory_id";
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    UPDATE "memories" SET "attachment_bytes" = "attachment_bytes" + NEW."size_bytes" WHERE "id" = NEW."memory_id";
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "attachments_storage_usage" AFTER INSERT OR DELETE ON "attachments"
FOR EACH ROW EXECUTE FUNCTION "engram_attachments_storage_usage"();
CREATE TRIGGER "attachments_storage_usage_update" AFTER UPDATE OF "memory_id", "size_bytes" ON "attachments"
FOR EACH ROW WHEN (OLD."memory_id" IS DISTINCT FROM NEW."memory_id" OR OLD."size_bytes" IS DISTINCT FROM NEW."size_bytes")
EXECUTE FUNCTION "engram_attachments_storage_usage"();

-- The attachments stored so far: through the memories update trigger, which adds them to the counters.
UPDATE "memories" m SET "attachment_bytes" = a."bytes"
FROM (SELECT "memory_id", sum("size_bytes")::bigint AS "bytes" FROM "attachments" GROUP BY "memory_id") a
WHERE m."id" = a."memory_id";

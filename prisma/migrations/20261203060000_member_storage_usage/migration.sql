-- First, the memories and memberships held still until this migration commits (SHARE: reads go on,
-- writes wait; the migration runs in one transaction). Every process migrates at start-up, so during a
-- rolling deploy older processes still push, edit and join under the old triggers: a write committed
-- while the backfill at the end read the memories was missing from its owner's share for good, and
-- from their counter, which the backfill recounts from the shares.
LOCK TABLE "memories", "hub_members" IN SHARE MODE;

-- A user's storage counter (scope 'user') counts only what they own in hubs they are a member of. A
-- member who left a team hub, or was removed from it, kept everything they wrote there in their name,
-- and it went on counting against their own quota although they could no longer read, edit or delete
-- it (nor free the room): a contributor removed from a busy team could be refused in their personal hub
-- for good. The hub's counter still counts it, and the memory keeps its owner_id.
--
-- hub_owner_usage holds each owner's share of each hub, kept by the memories triggers with the other
-- counters, so a membership change moves a share between the user's counter and nothing in one row
-- read, whatever the hub holds (a hub delete drops up to 1,000 members' shares in its short transaction).
-- No foreign keys: as storage_usage, rows are written by triggers of cascades whose hub or user is
-- already gone.
CREATE TABLE "hub_owner_usage" (
    "hub_id" UUID NOT NULL,
    "owner_id" UUID NOT NULL,
    "bytes" BIGINT NOT NULL DEFAULT 0,
    "memories" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "hub_owner_usage_pkey" PRIMARY KEY ("hub_id","owner_id")
);

-- Exactness under concurrency rests on one lock: the hub's counter row. Every memory change takes it
-- first (the hub counters come first in the global order), and so does every membership change (the
-- hub_members trigger below). The user's share of a change is decided in a statement after that lock
-- is held: in READ COMMITTED each statement of a volatile function reads a fresh snapshot, so it sees
-- every membership change committed by a transaction that held the lock before, and a membership change
-- reads the share after every memory change that held the lock before it committed. Decided in the
-- same statement as the lock, the snapshot predates the wait: a push racing a leave was counted for
-- the leaver and missed by the leave's subtraction.
CREATE OR REPLACE FUNCTION "engram_storage_usage_shift"("p_changes" "engram_usage_change"[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
  SELECT k."scope", k."scope_id", sum(c."sign" * c."bytes"), sum(c."sign")
  FROM unnest("p_changes") AS c
  CROSS JOIN LATERAL (VALUES
    ('hub', c."hub_id"),
    (CASE WHEN c."topic_id" IS NULL THEN 'inbox' ELSE 'topic' END, coalesce(c."topic_id", c."hub_id"))
  ) AS k("scope", "scope_id")
  -- A deleted topic keeps no counter (the topics trigger), whichever trigger runs first.
  WHERE k."scope" <> 'topic' OR EXISTS (SELECT FROM "topics" t WHERE t."id" = k."scope_id")
  GROUP BY k."scope", k."scope_id"
  -- The hub's row is written even when its sums are zero: its lock orders every change in the hub
  -- (migration 20261126190000_topic_memory_counts), and the membership check below relies on it.
  HAVING sum(c."sign" * c."bytes") <> 0 OR sum(c."sign") <> 0 OR k."scope" = 'hub'
  ORDER BY k."scope", k."scope_id"
  ON CONFLICT ("scope", "scope_id") DO UPDATE
    SET "bytes" = u."bytes" + EXCLUDED."bytes", "memories" = u."memories" + EXCLUDED."memories";

  INSERT INTO "hub_owner_usage" AS s ("hub_id", "owner_id", "bytes", "memories")
  SELECT c."hub_id", c."owner_id", sum(c."sign" * c."bytes"), sum(c."sign")
  FROM unnest("p_changes") AS c
  GROUP BY c."hub_id", c."owner_id"
  HAVING sum(c."sign" * c."bytes") <> 0 OR sum(c."sign") <> 0
  ORDER BY c."hub_id", c."owner_id"
  ON CONFLICT ("hub_id", "owner_id") DO UPDATE
    SET "bytes" = s."bytes" + EXCLUDED."bytes", "memories" = s."memories" + EXCLUDED."memories";

  INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
  SELECT 'user', c."owner_id", sum(c."sign" * c."bytes"), sum(c."sign")
  FROM unnest("p_changes") AS c
  WHERE EXISTS (SELECT FROM "hub_members" m WHERE m."hub_id" = c."hub_id" AND m."user_id" = c."owner_id")
  GROUP BY c."owner_id"
  HAVING sum(c."sign" * c."bytes") <> 0 OR sum(c."sign") <> 0
  ORDER BY c."owner_id"
  ON CONFLICT ("scope", "scope_id") DO UPDATE
    SET "bytes" = u."bytes" + EXCLUDED."bytes", "memories" = u."memories" + EXCLUDED."memories";
END
$$;

CREATE OR REPLACE FUNCTION "engram_memories_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  "v_bytes" bigint;
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- One new row (our code inserts memories one at a time): its counters already in the global order.
    "v_bytes" := octet_length(NEW."content")::bigint + NEW."attachment_bytes";
    PERFORM "engram_storage_usage_add"('hub', NEW."hub_id", "v_bytes", 1);
    PERFORM "engram_storage_usage_add"(CASE WHEN NEW."topic_id" IS NULL THEN 'inbox' ELSE 'topic' END, coalesce(NEW."topic_id", NEW."hub_id"), "v_bytes", 1);
    INSERT INTO "hub_owner_usage" AS s ("hub_id", "owner_id", "bytes", "memories") VALUES (NEW."hub_id", NEW."owner_id", "v_bytes", 1)
    ON CONFLICT ("hub_id", "owner_id") DO UPDATE SET "bytes" = s."bytes" + EXCLUDED."bytes", "memories" = s."memories" + EXCLUDED."memories";
    -- A statement after the hub's lock (see above).
    IF EXISTS (SELECT FROM "hub_members" m WHERE m."hub_id" = NEW."hub_id" AND m."user_id" = NEW."owner_id") THEN
      PERFORM "engram_storage_usage_add"('user', NEW."owner_id", "v_bytes", 1);
    END IF;
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

-- Joining adds the member's share of the hub to their counter, leaving or being removed (a hub delete
-- removes every membership) takes it off. The hubs' counters are locked first, as a memory change
-- takes them, then the share is read in a later statement (see above). Statement-level: a hub delete
-- drops all its members at once, their counters taken in one sorted pass.
CREATE FUNCTION "engram_member_share_shift"("p_sign" integer, "p_hub_ids" uuid[], "p_user_ids" uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
  SELECT DISTINCT 'hub', k."hub_id", 0::bigint, 0 FROM unnest("p_hub_ids") AS k("hub_id")
  ORDER BY 2
  ON CONFLICT ("scope", "scope_id") DO UPDATE SET "memories" = u."memories";

  INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
  SELECT 'user', k."user_id", "p_sign" * sum(s."bytes"), "p_sign" * sum(s."memories")::integer
  FROM unnest("p_hub_ids", "p_user_ids") AS k("hub_id", "user_id")
  JOIN "hub_owner_usage" s ON s."hub_id" = k."hub_id" AND s."owner_id" = k."user_id"
  GROUP BY k."user_id"
  HAVING sum(s."bytes") <> 0 OR sum(s."memories") <> 0
  ORDER BY k."user_id"
  ON CONFLICT ("scope", "scope_id") DO UPDATE
    SET "bytes" = u."bytes" + EXCLUDED."bytes", "memories" = u."memories" + EXCLUDED."memories";
END
$$;

CREATE FUNCTION "engram_hub_members_storage_usage"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  "v_hub_ids" uuid[];
  "v_user_ids" uuid[];
BEGIN
  -- One pass over the rows, so the two arrays pair up.
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(n."hub_id"), array_agg(n."user_id") INTO "v_hub_ids", "v_user_ids" FROM "new_rows" n;
    PERFORM "engram_member_share_shift"(1, "v_hub_ids", "v_user_ids");
  ELSE
    SELECT array_agg(o."hub_id"), array_agg(o."user_id") INTO "v_hub_ids", "v_user_ids" FROM "old_rows" o;
    PERFORM "engram_member_share_shift"(-1, "v_hub_ids", "v_user_ids");
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER "hub_members_storage_usage_insert" AFTER INSERT ON "hub_members"
REFERENCING NEW TABLE AS "new_rows" FOR EACH STATEMENT EXECUTE FUNCTION "engram_hub_members_storage_usage"();
CREATE TRIGGER "hub_members_storage_usage_delete" AFTER DELETE ON "hub_members"
REFERENCING OLD TABLE AS "old_rows" FOR EACH STATEMENT EXECUTE FUNCTION "engram_hub_members_storage_usage"();

-- The shares and the users' counters of what is stored so far.
INSERT INTO "hub_owner_usage" ("hub_id", "owner_id", "bytes", "memories")
SELECT "hub_id", "owner_id", sum(octet_length("content")::bigint + "attachment_bytes"), count(*) FROM "memories" GROUP BY "hub_id", "owner_id";
UPDATE "storage_usage" SET "bytes" = 0, "memories" = 0 WHERE "scope" = 'user';
INSERT INTO "storage_usage" AS u ("scope", "scope_id", "bytes", "memories")
SELECT 'user', m."user_id", sum(s."bytes"), sum(s."memories") FROM "hub_members" m JOIN "hub_owner_usage" s ON s."hub_id" = m."hub_id" AND s."owner_id" = m."user_id" GROUP BY m."user_id"
ON CONFLICT ("scope", "scope_id") DO UPDATE SET "bytes" = EXCLUDED."bytes", "memories" = EXCLUDED."memories";

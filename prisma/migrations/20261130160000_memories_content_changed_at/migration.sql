-- A dream keeps the newer content of a duplicate pair. It read that from updated_at, but updated_at also
-- moves on writes that leave the text alone (filing into a topic, by a run or the API, batch-move, undo,
-- archive/restore): an older memory filed last week then counted as newer than its duplicate, and the
-- duplicate with the more recent content was archived. content_changed_at moves only when the title or
-- content does. processed_at is no substitute (re-processing such as reembed moves it), nor is version
-- (a count, not a time). Set by the database so no writer (create, PATCH, re-push, reingest, a merge's
-- rewrite, the pipeline's extraction, undo) can forget it. It takes the row's updated_at: the time the
-- writer stamped the change (a pipeline write that leaves updated_at alone keeps the push's time).
-- Existing rows take their updated_at, the best record of their last content change there is.
ALTER TABLE "memories" ADD COLUMN "content_changed_at" TIMESTAMPTZ(3);
UPDATE "memories" SET "content_changed_at" = "updated_at";
ALTER TABLE "memories" ALTER COLUMN "content_changed_at" SET NOT NULL, ALTER COLUMN "content_changed_at" SET DEFAULT CURRENT_TIMESTAMP;

CREATE FUNCTION "engram_memories_content_changed_at"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW."content" IS DISTINCT FROM OLD."content" OR NEW."title" IS DISTINCT FROM OLD."title" THEN
    NEW."content_changed_at" := NEW."updated_at";
  END IF;
  RETURN NEW;
END
$$;

-- Named to sort after memories_updated_at_forward (same-event BEFORE triggers fire in name order), so it
-- copies updated_at as that trigger moved it.
CREATE TRIGGER "memories_updated_at_then_content_changed_at"
BEFORE INSERT OR UPDATE OF "content", "title" ON "memories"
FOR EACH ROW EXECUTE FUNCTION "engram_memories_content_changed_at"();

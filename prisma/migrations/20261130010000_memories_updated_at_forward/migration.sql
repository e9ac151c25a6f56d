-- Clients notice a change to a memory by its updated_at (and page and sort by it), and a PATCH writes
-- only while updated_at is still the one it read: so every write that sets updated_at must move it past
-- the stored one, even in the same millisecond as the write before or after the clock stepped back.
-- Each writer did that itself (GREATEST(now, updated_at + 1 ms)), and one that forgot went through on
-- a stale read. The database now does it for every such write: NEW is at least OLD + 1 ms (the column
-- holds milliseconds, as do the Dates it is read into, so a smaller step would round back to OLD).
-- Only updates that name updated_at: the pipeline's, access counts and the topic delete's set-null do
-- not, and keep it as it is. The WHEN leaves the function out of the usual write (a clock already past
-- the stored value), so a bulk update pays for it only on the rows it must move.
CREATE FUNCTION "engram_memories_updated_at_forward"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW."updated_at" := OLD."updated_at" + interval '1 millisecond';
  RETURN NEW;
END
$$;

CREATE TRIGGER "memories_updated_at_forward"
BEFORE UPDATE OF "updated_at" ON "memories"
FOR EACH ROW WHEN (NEW."updated_at" < OLD."updated_at" + interval '1 millisecond')
EXECUTE FUNCTION "engram_memories_updated_at_forward"();

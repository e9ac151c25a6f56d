-- A hard delete rewrites the bell rows naming its memories by kind and source (a review's, a failed
-- processing's: lib/memories/drop-memory-copies.ts); without this, every delete read every notification.
CREATE INDEX "notifications_kind_source_id_idx" ON "notifications" ("kind", "source_id");

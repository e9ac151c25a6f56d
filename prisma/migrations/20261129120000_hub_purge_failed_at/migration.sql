-- When the purge of a deleted hub last failed. The sweep took deleted hubs oldest first and stopped at
-- the first that failed, so one hub that could not be purged (a row the database refused to delete)
-- left every hub deleted after it with its memories for good. The sweep now goes on past a failure,
-- and takes hubs that never failed first, then the one that failed longest ago.
ALTER TABLE "hubs" ADD COLUMN "purge_failed_at" TIMESTAMPTZ(3);

-- A deleted team hub is marked first (its members, invites and transfers go at once, so nobody reads or
-- writes it any more) and its memories are then deleted in bounded batches: one transaction for a hub
-- of hundreds of thousands of memories outlasted the transaction timeout and could never succeed. The
-- mark is what the purge sweep resumes from after a crash.
ALTER TABLE "hubs" ADD COLUMN "deleted_at" TIMESTAMPTZ(3);
CREATE INDEX "hubs_deleted_at_idx" ON "hubs" ("deleted_at") WHERE "deleted_at" IS NOT NULL;

-- When a topic's delete began (lib/topics/delete-topic.ts). Its memories leave it a batch per
-- transaction; marked by the first batch, the branch is fixed: a topic being deleted is hidden and
-- can neither be moved, changed nor filed into, so no batch unfiles a topic that is kept after all.
ALTER TABLE "topics" ADD COLUMN "deleting_at" TIMESTAMPTZ(3);

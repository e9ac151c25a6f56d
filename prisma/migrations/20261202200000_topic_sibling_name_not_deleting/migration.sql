-- A topic being deleted (deleting_at, lib/topics/delete-topic.ts) is gone to every request but its
-- delete, so its name is free: the index still held it, and a create, rename, move, restore or
-- reorder taking that name passed the check (HubTopics leaves such topics out) and failed here, on
-- every retry until the delete finished. Topics are few per hub (at most 500), so the index is
-- built again in the migration's transaction.
DROP INDEX "topics_sibling_name_key";
CREATE UNIQUE INDEX "topics_sibling_name_key" ON "topics"("hub_id", COALESCE("parent_id", '00000000-0000-0000-0000-000000000000'::uuid), lower("name"))
  WHERE "deleting_at" IS NULL;

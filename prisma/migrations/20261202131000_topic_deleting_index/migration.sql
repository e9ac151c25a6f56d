-- The sweep finishing topic deletes cut short (lib/topics/delete-topic.ts) looks for marked topics
-- every 10 minutes: a partial index holds only them, so it reads none of the topics no one deletes.
CREATE INDEX "topics_deleting_at_idx" ON "topics" ("deleting_at") WHERE "deleting_at" IS NOT NULL;

-- Which delete owns a branch being deleted (lib/topics/delete-topic.ts): a delete sent again and the
-- sweep finishing the same branch each ran its batches, alternating. Each batch checks the claim of the
-- branch's top under the hub's topic lock; a delete sent again takes the claim over, the sweep claims
-- only a branch left alone for its grace, and one that lost the claim stops.
ALTER TABLE "topics" ADD COLUMN "deleting_claim" UUID;

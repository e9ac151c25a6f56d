-- Handing a leaving member's memories to the hub's owner (lib/hubs/drop-membership.ts) changes only their
-- owner_id, and the row trigger then moved each one's counters by itself: six counter updates a row, on
-- the same few rows, in one transaction. 20,000 memories took about 40 s, past the transaction timeout,
-- so such a member could never leave. While the transaction sets engram.owner_hand_over, the row trigger
-- stays out and the hand-over moves the two owners' counters once, by the sums (the hub, inbox and topic
-- counters do not change with an owner). Set only with SET LOCAL around that one statement.
DROP TRIGGER "memories_storage_usage_update" ON "memories";
CREATE TRIGGER "memories_storage_usage_update" AFTER UPDATE OF "content", "hub_id", "owner_id", "topic_id", "attachment_bytes" ON "memories"
FOR EACH ROW WHEN ((OLD."content" IS DISTINCT FROM NEW."content" OR OLD."hub_id" IS DISTINCT FROM NEW."hub_id"
  OR OLD."owner_id" IS DISTINCT FROM NEW."owner_id" OR OLD."topic_id" IS DISTINCT FROM NEW."topic_id"
  OR OLD."attachment_bytes" IS DISTINCT FROM NEW."attachment_bytes")
  AND current_setting('engram.owner_hand_over', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION "engram_memories_storage_usage"();

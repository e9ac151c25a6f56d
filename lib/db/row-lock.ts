import type { DbClient } from "./database.ts";

/**
 * Locks these memories' rows for the rest of the transaction (FOR UPDATE, in id order) and returns
 * the ids that exist there (only rows in `hubIds`: the caller's hubs). A transaction that writes several memories takes all their locks before its
 * first write: each write fires triggers that update shared counter rows (storage usage, lexical
 * statistics), and holding one of those while waiting for the next memory deadlocks with a delete
 * or an edit of that memory, which locks the memory first and the counters after. Prisma has no
 * FOR UPDATE, hence raw SQL.
 */
export async function lockMemoryRows(tx: DbClient, ids: string[], hubIds: string[]): Promise<string[]> {
  if (ids.length === 0 || hubIds.length === 0) return [];
  const rows = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text AS id FROM memories WHERE id = ANY(${ids}::uuid[]) AND hub_id = ANY(${hubIds}::uuid[]) ORDER BY id FOR UPDATE`;
  return rows.map((row) => row.id);
}

/**
 * Locks every memory of a hub, or of some of its topics, in id order: for a delete whose cascade
 * (the hub's memories deleted, or the topics' memories moved to the inbox) would otherwise lock them
 * in the order it reads them, deadlocking with a batch move or delete holding some of the same rows
 * in id order (tests/races.test.ts).
 */
export async function lockMemoriesOf(tx: DbClient, hubId: string, topicIds?: string[]): Promise<void> {
  if (topicIds && topicIds.length === 0) return;
  // Each with the lock its cascade takes: a topic's memories are updated (their topic cleared), a hub's deleted.
  await (topicIds
    ? tx.$executeRaw`SELECT 1 FROM memories WHERE hub_id = ${hubId}::uuid AND topic_id = ANY(${topicIds}::uuid[]) ORDER BY id FOR NO KEY UPDATE`
    : tx.$executeRaw`SELECT 1 FROM memories WHERE hub_id = ${hubId}::uuid ORDER BY id FOR UPDATE`);
}

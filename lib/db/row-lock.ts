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

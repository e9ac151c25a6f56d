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
 * A user's and a hub's storage counters, read and locked for the rest of the transaction (user row
 * first, the order the memories triggers update them in). Rows that do not exist yet are absent.
 */
export async function lockStorageUsageRows(tx: DbClient, userId: string, hubId: string): Promise<{ scope: string; bytes: number; memories: number }[]> {
  const rows = await tx.$queryRaw<{ scope: string; bytes: bigint | number; memories: number }[]>`
    SELECT scope, bytes, memories FROM storage_usage
    WHERE (scope = 'user' AND scope_id = ${userId}::uuid) OR (scope = 'hub' AND scope_id = ${hubId}::uuid)
    ORDER BY scope DESC FOR UPDATE`;
  return rows.map((row) => ({ scope: row.scope, bytes: Number(row.bytes), memories: Number(row.memories) }));
}

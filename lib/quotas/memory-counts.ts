import type { DbClient } from "@/lib/db/database.ts";

/**
 * Memories per hub (scope "hub") or per owner (scope "user"), from the counters the memories triggers
 * keep in the same transaction as each write (migration 20261122165000_storage_usage). Counting the rows
 * instead reads every memory of the hub: 10–16 ms for a 2,000-memory hub on the embedded database, on
 * each hub list, `/v1/auth/me` and memory list.
 */
export async function memoryCounts(db: DbClient, scope: "user" | "hub", ids: readonly string[]): Promise<Map<string, number>> {
  const rows = ids.length
    ? await db.storageUsage.findMany({ where: { scope, scopeId: { in: [...ids] } }, select: { scopeId: true, memories: true } })
    : [];
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const row of rows) counts.set(row.scopeId, row.memories);
  return counts;
}

import type { DbClient } from "@/lib/db/database.ts";

/**
 * Memories per topic of one hub, keyed by topic id; `null` is the hub's memories without a topic.
 * Read from the counters the memories triggers keep in the same transaction as each write (scopes
 * `topic` and `inbox` of storage_usage, migration 20261126190000_topic_memory_counts): grouping the
 * hub's memories instead took 21 ms for a 2,000-memory hub on the embedded database, and grew with it.
 */
export async function topicMemoryCounts(db: DbClient, hubId: string, topicIds: readonly string[]): Promise<Map<string | null, number>> {
  const rows = await db.storageUsage.findMany({
    where: { OR: [{ scope: "inbox", scopeId: hubId }, ...(topicIds.length ? [{ scope: "topic", scopeId: { in: [...topicIds] } }] : [])] },
    select: { scope: true, scopeId: true, memories: true },
  });
  const counts = new Map<string | null, number>();
  for (const row of rows) counts.set(row.scope === "inbox" ? null : row.scopeId, row.memories);
  return counts;
}

/**
 * The hub's topics being deleted (the partial index on deleting_at): the memories still filed under
 * them show no topic (topics-being-deleted.ts) until their batch takes them out, so they count with
 * the memories without one. Left out, a client listing the memories with no topic found more than
 * `unassigned_count` said.
 */
export async function deletingTopicIds(db: DbClient, hubId: string): Promise<string[]> {
  return (await db.topic.findMany({ where: { hubId, deletingAt: { not: null } }, select: { id: true } })).map((row) => row.id);
}

/** The hub's memories shown with no topic: its inbox and those under `deleting` (from topicMemoryCounts with them). */
export function unassignedCount(counts: Map<string | null, number>, deleting: readonly string[]): number {
  return deleting.reduce((sum, id) => sum + (counts.get(id) ?? 0), counts.get(null) ?? 0);
}

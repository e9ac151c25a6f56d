import type { DbClient, SqlRunner } from "@/lib/db/database.ts";

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
 * The hub's memories shown with no topic: its inbox, and those still filed under a topic being deleted
 * (they show no topic until their batch takes them out; left out, a client listing the memories with no
 * topic found more than it was told). One statement, so one snapshot: read apart, a delete's first batch
 * committing between the topics being deleted and the counters left its topic's memories out.
 */
export async function unassignedCount(sql: SqlRunner, hubId: string): Promise<number> {
  const [row] = await sql.query<{ n: number }>(
    `SELECT COALESCE(sum(su.memories), 0)::int AS n FROM storage_usage su
      WHERE (su.scope = 'inbox' AND su.scope_id = $1::uuid)
         OR (su.scope = 'topic' AND su.scope_id IN (SELECT t.id FROM topics t WHERE t.hub_id = $1::uuid AND t.deleting_at IS NOT NULL))`,
    [hubId],
  );
  return Number(row?.n ?? 0);
}

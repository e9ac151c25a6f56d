import type { AuthContext } from "@/lib/api/context.ts";
import { membershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeTopic, type TopicRow } from "./serialize-topic.ts";
import { MAX_TOPICS_PER_HUB } from "./topic-fields.ts";
import { deletingTopicIds, topicMemoryCounts, unassignedCount } from "./topic-memory-counts.ts";

export type TopicTree = ReturnType<typeof serializeTopic> & { total_memory_count: number; children: TopicTree[] };

/** Siblings in the order people arrange them: position, then name, then id. */
export function bySiblingOrder(a: TopicRow, b: TopicRow): number {
  return a.position - b.position || a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
}

/**
 * One hub's active topics as a tree, with memories per topic (`memory_count`)
 * and per branch (`total_memory_count`), and the hub's memories without a
 * topic (`unassigned_count`). Whole, not paginated: a hub holds at most 500
 * topics, nested at most 5 deep. Archived branches are left out
 * (GET /v1/topics/archived lists them).
 */
export async function listTopics(ctx: AuthContext, hubId: string) {
  const { hub } = await membershipOrThrow(ctx, hubId);
  const [rows, deleting] = await Promise.all([
    ctx.db.topic.findMany({ where: { hubId: hub.id, archivedAt: null, deletingAt: null }, take: MAX_TOPICS_PER_HUB }),
    deletingTopicIds(ctx.db, hub.id),
  ]);
  const counts = await topicMemoryCounts(ctx.db, hub.id, [...rows.map((row) => row.id), ...deleting]);
  const byParent = new Map<string | null, TopicRow[]>();
  const ids = new Set(rows.map((row) => row.id));
  for (const row of rows) {
    // A parent that is gone or archived cannot hide an active topic: it shows at the root.
    const parent = row.parentId && ids.has(row.parentId) ? row.parentId : null;
    byParent.set(parent, [...(byParent.get(parent) ?? []), row]);
  }
  const build = (parent: string | null, seen: Set<string>): TopicTree[] =>
    (byParent.get(parent) ?? [])
      .filter((row) => !seen.has(row.id))
      .sort(bySiblingOrder)
      .map((row) => {
        const children = build(row.id, new Set([...seen, row.id]));
        const own = counts.get(row.id) ?? 0;
        return { ...serializeTopic(row, own), total_memory_count: own + children.reduce((sum, child) => sum + child.total_memory_count, 0), children };
      });
  return { topics: build(null, new Set()), unassigned_count: unassignedCount(counts, deleting) };
}

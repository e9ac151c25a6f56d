import type { DbClient } from "@/lib/db/database.ts";

/** Memories per topic for a page of topics, in one grouped query. */
export async function topicMemoryCounts(db: DbClient, topicIds: string[]): Promise<Map<string, number>> {
  if (topicIds.length === 0) return new Map();
  const groups = await db.memory.groupBy({ by: ["topicId"], where: { topicId: { in: topicIds } }, _count: { _all: true } });
  return new Map(groups.flatMap((group) => (group.topicId ? [[group.topicId, group._count._all] as const] : [])));
}

import type { DbClient } from "@/lib/db/database.ts";

/** Memories per topic of one hub, in one grouped query; `null` is the unassigned count. */
export async function topicMemoryCounts(db: DbClient, hubId: string): Promise<Map<string | null, number>> {
  const groups = await db.memory.groupBy({ by: ["topicId"], where: { hubId }, _count: { _all: true } });
  return new Map(groups.map((group) => [group.topicId, group._count._all] as const));
}

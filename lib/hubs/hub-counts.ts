import type { DbClient } from "@/lib/db/database.ts";
import { memoryCounts } from "@/lib/quotas/memory-counts.ts";

/** Memories, members, topics and usable invites of one hub. */
export async function hubCounts(db: DbClient, hubId: string, now: Date) {
  const [memories, members, topics, invites] = await Promise.all([
    memoryCounts(db, "hub", [hubId]).then((counts) => counts.get(hubId) ?? 0),
    db.hubMember.count({ where: { hubId } }),
    db.topic.count({ where: { hubId } }),
    db.invite.count({ where: { hubId, state: "active", expiresAt: { gt: now } } }),
  ]);
  return { memories, members, topics, invites };
}

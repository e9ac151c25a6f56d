import type { DbClient } from "@/lib/db/database.ts";

/** Memories, members, topics and usable invites of one hub. */
export async function hubCounts(db: DbClient, hubId: string, now: Date) {
  const [memories, members, topics, invites] = await Promise.all([
    db.memory.count({ where: { hubId } }),
    db.hubMember.count({ where: { hubId } }),
    db.topic.count({ where: { hubId } }),
    db.invite.count({ where: { hubId, state: "active", expiresAt: { gt: now } } }),
  ]);
  return { memories, members, topics, invites };
}

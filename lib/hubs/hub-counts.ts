import type { DbClient } from "@/lib/db/database.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { usableInviteWhere } from "@/lib/invites/usable-invite-where.ts";

/** Memories, members, topics and usable invites of one hub. */
export async function hubCounts(db: DbClient, hubId: string, now: Date) {
  const [memories, members, topics, invites] = await Promise.all([
    storageUsage(db, "hub", hubId).then((usage) => usage.memories),
    db.hubMember.count({ where: { hubId } }),
    db.topic.count({ where: { hubId } }),
    db.invite.count({ where: usableInviteWhere(hubId, now) }),
  ]);
  return { memories, members, topics, invites };
}

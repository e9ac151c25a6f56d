import type { DbClient } from "@/lib/db/database.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { usableInviteWhere } from "@/lib/invites/usable-invite-where.ts";

/**
 * Memories, members, topics and usable invites of one hub. Topics being deleted are left out: gone from
 * the tree and 404 to a get, they were still counted until their delete finished.
 */
export async function hubCounts(db: DbClient, hubId: string, now: Date) {
  const [memories, members, topics, invites] = await Promise.all([
    storageUsage(db, "hub", hubId).then((usage) => usage.memories),
    db.hubMember.count({ where: { hubId } }),
    db.topic.count({ where: { hubId, deletingAt: null } }),
    db.invite.count({ where: usableInviteWhere(hubId, now) }),
  ]);
  return { memories, members, topics, invites };
}

import type { DbClient } from "@/lib/db/database.ts";
import { onInviteRevoked } from "@/lib/notifications/notify.ts";
import { orphanedInviteWhere } from "./usable-invite-where.ts";

/**
 * Revokes the live links `userId` made in the hub that no longer admit anyone because their maker
 * left or was demoted. Called before that person joins again or gets a higher role (in the same
 * transaction): those links held none of the hub's 20 slots, so coming back to life with their maker
 * they pushed the usable invites past the limit, and links the other managers had counted as dead
 * let people in again.
 */
export async function revokeOrphanedInvites(tx: DbClient, hubId: string, userId: string, now: Date): Promise<void> {
  const revoked = await tx.invite.updateManyAndReturn({
    where: { AND: [orphanedInviteWhere(hubId, now), { createdBy: userId }] },
    data: { state: "revoked", revokedAt: now },
    select: { id: true },
  });
  for (const invite of revoked) await onInviteRevoked(tx, invite.id, now);
}

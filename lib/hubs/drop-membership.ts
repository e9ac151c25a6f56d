import type { Db } from "@/lib/db/database.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";

/**
 * Ends a non-owner's membership and cancels a pending ownership transfer aimed
 * at them, atomically. The owner row is never matched, so a concurrent transfer
 * that just made this user the owner wins. Returns whether a row was removed.
 */
export async function dropMembership(db: Db, hubId: string, userId: string, now: Date, actorId: string | null = userId): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const { count } = await tx.hubMember.deleteMany({ where: { hubId, userId, role: { not: "owner" } } });
    if (count === 0) return false;
    await tx.ownershipTransfer.updateMany({
      where: { hubId, targetUserId: userId, state: "pending" },
      data: { state: "canceled", resolvedAt: now },
    });
    await emitEvent(tx, { type: "member.removed", hubId, actorId, entityId: userId });
    return true;
  });
}

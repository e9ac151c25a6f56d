import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { assertActsForAccount, lockHubMembers, membershipOrThrow } from "./hub-access.ts";
import { serializeTransfer } from "./serialize-hub.ts";
import { assertTransferPending, transferOrThrow } from "./transfer-or-throw.ts";
import { onTransferResolved } from "@/lib/notifications/notify.ts";
import { revokeOrphanedInvites } from "@/lib/invites/revoke-orphaned-invites.ts";

/**
 * The target accepts: they become owner (hubs.owner_id too), the previous
 * owner becomes admin, in one transaction. Every write is conditional on the
 * state it expects, so a concurrent cancel, accept or leave aborts the whole.
 */
export async function acceptTransfer(ctx: AuthContext, hubId: string, transferId: string) {
  const { hub } = await membershipOrThrow(ctx, hubId);
  assertActsForAccount(ctx.credential, "accept an ownership transfer");
  const transfer = await transferOrThrow(ctx.db, hub.id, transferId);
  if (transfer.targetUserId !== ctx.user.id) throw new ApiError("forbidden", "Only the member the hub is offered to can accept it");
  const now = ctx.now();
  assertTransferPending(transfer, now);
  const accepted = await ctx.db.$transaction(async (tx) => {
    // The previous owner is demoted here, so this takes the hub's membership lock exclusively like any
    // demotion (before the transfer row, as a leave does): an action of theirs that checked their
    // role under that lock has committed first, and one that checks it later sees them as admin.
    await lockHubMembers(tx, hub.id);
    const claimed = await tx.ownershipTransfer.updateManyAndReturn({
      where: { id: transfer.id, state: "pending", expiresAt: { gt: now } },
      data: { state: "accepted", resolvedAt: now },
    });
    if (claimed.length === 0) {
      assertTransferPending(await tx.ownershipTransfer.findUniqueOrThrow({ where: { id: transfer.id } }), now);
      throw new ApiError("conflict", "This ownership transfer is no longer pending");
    }
    const moved = await tx.hub.updateMany({
      where: { id: hub.id, ownerId: transfer.fromUserId },
      data: { ownerId: transfer.targetUserId, updatedAt: now },
    });
    // Admin links the new owner made while an owner's, dead since, stay dead (they held no slot).
    await revokeOrphanedInvites(tx, hub.id, transfer.targetUserId, now);
    const promoted = await tx.hubMember.updateMany({
      where: { hubId: hub.id, userId: transfer.targetUserId, role: { not: "owner" } },
      data: { role: "owner" },
    });
    const demoted = await tx.hubMember.updateMany({
      where: { hubId: hub.id, userId: transfer.fromUserId, role: "owner" },
      data: { role: "admin" },
    });
    if (moved.count !== 1 || promoted.count !== 1 || demoted.count !== 1) {
      throw new ApiError("conflict", "The hub's ownership or membership changed since this transfer was offered");
    }
    await onTransferResolved(tx, transfer, hub, "accepted", ctx.user.id, now);
    return claimed[0]!;
  });
  return serializeTransfer(accepted, now);
}

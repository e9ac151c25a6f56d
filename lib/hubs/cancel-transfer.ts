import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { assertActsForAccount, hubMembersLockKey, membershipOrThrow } from "./hub-access.ts";
import { serializeTransfer } from "./serialize-hub.ts";
import { assertTransferPending, transferOrThrow } from "./transfer-or-throw.ts";
import { onTransferResolved } from "@/lib/notifications/notify.ts";

/** The current owner withdraws the offer, or the target declines it; only while pending. */
export async function cancelTransfer(ctx: AuthContext, hubId: string, transferId: string) {
  const { hub } = await membershipOrThrow(ctx, hubId);
  assertActsForAccount(ctx.credential, "cancel an ownership transfer");
  const now = ctx.now();
  const canceled = await ctx.db.$transaction(async (tx) => {
    // The caller's role and the transfer are read under the hub's membership lock, which an accept, a
    // removal, a leave and a deletion take exclusively: read before it, a target removed (their offer
    // declined by the removal) or an owner who handed the hub over a moment ago still acted on it.
    await lockForTransaction(tx, { shared: hubMembersLockKey(hub.id) });
    const member = await tx.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: ctx.user.id } }, select: { role: true } });
    if (!member) throw new ApiError("not_found", "Hub not found");
    const transfer = await transferOrThrow(tx, hub.id, transferId);
    if (member.role !== "owner" && transfer.targetUserId !== ctx.user.id) {
      throw new ApiError("forbidden", "Only the hub owner or the transfer's target can cancel it");
    }
    assertTransferPending(transfer, now);
    const rows = await tx.ownershipTransfer.updateManyAndReturn({
      where: { id: transfer.id, state: "pending", expiresAt: { gt: now } },
      data: { state: "canceled", resolvedAt: now },
    });
    // The row was read under the lock, but a cancel by the other party (who takes it shared too) can come first.
    if (rows.length === 0) {
      assertTransferPending(await tx.ownershipTransfer.findUniqueOrThrow({ where: { id: transfer.id } }), now);
      throw new ApiError("conflict", "This ownership transfer is no longer pending");
    }
    await onTransferResolved(tx, transfer, hub, "canceled", ctx.user.id, now);
    return rows[0]!;
  });
  // `status` and `transfer_id` are what the Memax SDK reads back.
  return { ...serializeTransfer(canceled, now), status: "canceled" as const, transfer_id: canceled.id };
}

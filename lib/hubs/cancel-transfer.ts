import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { assertActsForAccount, membershipOrThrow } from "./hub-access.ts";
import { serializeTransfer } from "./serialize-hub.ts";
import { assertTransferPending, transferOrThrow } from "./transfer-or-throw.ts";
import { onTransferResolved } from "@/lib/notifications/notify.ts";

/** The current owner withdraws the offer, or the target declines it; only while pending. */
export async function cancelTransfer(ctx: AuthContext, hubId: string, transferId: string) {
  const { hub, role } = await membershipOrThrow(ctx, hubId);
  assertActsForAccount(ctx.credential, "cancel an ownership transfer");
  const transfer = await transferOrThrow(ctx.db, hub.id, transferId);
  if (role !== "owner" && transfer.targetUserId !== ctx.user.id) {
    throw new ApiError("forbidden", "Only the hub owner or the transfer's target can cancel it");
  }
  const now = ctx.now();
  assertTransferPending(transfer, now);
  const canceled = await ctx.db.$transaction(async (tx) => {
    const rows = await tx.ownershipTransfer.updateManyAndReturn({
      where: { id: transfer.id, state: "pending", expiresAt: { gt: now } },
      data: { state: "canceled", resolvedAt: now },
    });
    if (rows.length) await onTransferResolved(tx, transfer, hub, "canceled", ctx.user.id, now);
    return rows;
  });
  if (canceled.length === 0) {
    assertTransferPending(await ctx.db.ownershipTransfer.findUniqueOrThrow({ where: { id: transfer.id } }), now);
    throw new ApiError("conflict", "This ownership transfer is no longer pending");
  }
  // `status` and `transfer_id` are what the Memax SDK reads back.
  return { ...serializeTransfer(canceled[0]!, now), status: "canceled" as const, transfer_id: transfer.id };
}

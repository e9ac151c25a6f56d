import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { newId } from "@/lib/ids.ts";
import { assertTeamHub, hubPermissionOrThrow, lockMembershipOrThrow } from "./hub-access.ts";
import { TRANSFER_TTL_MS } from "./hub-fields.ts";
import { serializeTransfer } from "./serialize-hub.ts";
import { onTransferCreated } from "@/lib/notifications/notify.ts";

const invalidTarget = (message: string) => new ApiError("invalid_request", message, { issues: [{ path: "target_user_id", message }] });

/**
 * Offers the hub to another member; pending for 7 days. One pending transfer
 * per hub is guaranteed by the partial unique index ownership_transfers_one_pending,
 * so concurrent offers cannot both succeed: the loser is transfer_exists.
 */
export async function createTransfer(ctx: AuthContext, hubId: string, input: { target_user_id: string }) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.own", "transfer ownership");
  assertTeamHub(hub, "transferred");
  // The database compares UUIDs regardless of case: the owner's own id in capitals is still the owner.
  if (input.target_user_id.toLowerCase() === ctx.user.id) throw invalidTarget("you already own this hub");
  const target = await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: input.target_user_id } } });
  if (!target) throw invalidTarget("the target must already be a member of the hub");
  const now = ctx.now();
  try {
    const transfer = await ctx.db.$transaction(async (tx) => {
      // The caller and the target read again under the hub's membership lock, which an accepted
      // transfer, a leave or a removal takes exclusively: an owner who handed the hub over a moment
      // ago offers it to no one, and an offer is never made to someone who left a moment ago (whose
      // pending offers the leave cancelled), to be accepted after they rejoin.
      await lockMembershipOrThrow(tx, ctx, hub, "hub.own", "transfer ownership");
      if (!(await tx.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: target.userId } }, select: { role: true } }))) {
        throw invalidTarget("the target must already be a member of the hub");
      }
      // An expired offer still holds the index slot until it is marked expired.
      await tx.ownershipTransfer.updateMany({
        where: { hubId: hub.id, state: "pending", expiresAt: { lte: now } },
        data: { state: "expired", resolvedAt: now },
      });
      const pending = await tx.ownershipTransfer.findFirst({ where: { hubId: hub.id, state: "pending" }, select: { id: true } });
      if (pending) throw transferExists(pending.id);
      const created = await tx.ownershipTransfer.create({
        data: {
          id: newId(now.getTime()),
          hubId: hub.id,
          fromUserId: ctx.user.id,
          targetUserId: target.userId,
          state: "pending",
          createdAt: now,
          expiresAt: new Date(now.getTime() + TRANSFER_TTL_MS),
        },
      });
      await onTransferCreated(tx, created, hub);
      return created;
    });
    return serializeTransfer(transfer, now);
  } catch (error) {
    if (isUniqueViolation(error)) {
      const pending = await ctx.db.ownershipTransfer.findFirst({ where: { hubId: hub.id, state: "pending" }, select: { id: true } });
      throw transferExists(pending?.id);
    }
    throw error;
  }
}

function transferExists(transferId: string | undefined): ApiError {
  return new ApiError(
    "transfer_exists",
    "This hub already has a pending ownership transfer; cancel it first",
    transferId ? { transfer_id: transferId } : undefined,
  );
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { can } from "@/lib/api/permissions.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { onInviteRegenerated } from "@/lib/notifications/notify.ts";
import { assertInviteRoom } from "./create-invite.ts";
import { INVITE_TTL_MS } from "./invite-fields.ts";
import { assertInviteUsable, makerCanGrant, managedInviteOrThrow } from "./invite-or-throw.ts";
import { inviteToken } from "./invite-token.ts";
import { inviteState, serializeInvite } from "./serialize-invite.ts";

/**
 * A new token (the old link dies in the same write) and a fresh 7-day expiry.
 * Works on active and expired invites; revoked and used ones stay dead.
 */
export async function regenerateInvite(ctx: AuthContext, hubId: string, inviteId: string) {
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "regenerate invites");
  const invite = await managedInviteOrThrow(ctx.db, hub.id, role, inviteId);
  const now = ctx.now();
  assertInviteUsable(invite, now, true);
  const issued = inviteToken(await serverSecret(ctx.db));
  const updated = await ctx.db.$transaction(async (tx) => {
    // The caller's own role again, under the hub's membership lock: an admin demoted or removed since the
    // check above must not walk away with a live link that still speaks for the invite's maker.
    const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "regenerate invites");
    if (invite.role === "admin" && !can(current.role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can manage admin invites");
    // An expired invite coming back to life takes one of the hub's active slots; so does one whose maker can
    // no longer grant it (it held no slot, and the caller's name makes it usable).
    if (inviteState(invite, now) === "expired" || !(await makerCanGrant(tx, invite))) await assertInviteRoom(tx, hub.id, now);
    const rows = await tx.invite.updateManyAndReturn({
      where: { id: invite.id, state: "active", tokenHash: invite.tokenHash },
      // The new link is the caller's to vouch for (their role was just checked under the lock): an invite
      // whose maker has left or been demoted becomes usable again instead of a fresh link that answers 410.
      data: { tokenHash: issued.tokenHash, tokenEncrypted: issued.tokenEncrypted, expiresAt: new Date(now.getTime() + INVITE_TTL_MS), createdBy: ctx.user.id },
    });
    if (rows.length === 0) {
      assertInviteUsable(await tx.invite.findUniqueOrThrow({ where: { id: invite.id } }), now, true);
      throw new ApiError("conflict", "The invite changed meanwhile; reload and try again");
    }
    await onInviteRegenerated(tx, rows[0]!, now);
    return rows[0]!;
  });
  return serializeInvite(updated, now, issued.token);
}

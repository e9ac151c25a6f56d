import type { AuthContext } from "@/lib/api/context.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { onInviteRevoked } from "@/lib/notifications/notify.ts";
import { assertInviteUsable, inviteOrThrow } from "./invite-or-throw.ts";

/** Kills the link at once; revoking twice is harmless, a used invite is 410 used. */
export async function revokeInvite(ctx: AuthContext, hubId: string, inviteId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "revoke invites");
  // Any invite, admin ones included: an admin who sees a leaked admin link can kill it (the safe direction).
  const invite = await inviteOrThrow(ctx.db, hub.id, inviteId);
  const now = ctx.now();
  if (invite.state !== "revoked") {
    const count = await ctx.db.$transaction(async (tx) => {
      // The caller's own role again, under the hub's membership lock: an admin removed or demoted since the
      // check above revokes nothing once that change has returned.
      await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "revoke invites");
      const revoked = await tx.invite.updateMany({ where: { id: invite.id, state: "active" }, data: { state: "revoked", revokedAt: now } });
      if (revoked.count > 0) await onInviteRevoked(tx, invite.id, now);
      return revoked.count;
    });
    // Lost a race with an accept (or a concurrent revoke): report what it is now.
    if (count === 0) {
      const current = await ctx.db.invite.findUniqueOrThrow({ where: { id: invite.id } });
      if (current.state !== "revoked") assertInviteUsable(current, now, true);
    }
  }
  return { id: invite.id, invite_id: invite.id, revoked: true as const, status: "revoked" as const };
}

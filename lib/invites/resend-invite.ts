import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { can } from "@/lib/api/permissions.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { resendIntervalMs } from "./invite-fields.ts";
import { assertInviteUsable, assertMakerCanGrant, managedInviteOrThrow } from "./invite-or-throw.ts";
import { revealInviteToken } from "./invite-token.ts";
import { deliverMail, enqueueMail } from "@/lib/mail/send-mail.ts";
import { assertInviteMailRoom, inviteMail } from "./send-invite-email.ts";
import { serializeInvite } from "./serialize-invite.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";

/**
 * Mails the same link again (at most once a minute per invite). A relay
 * failure is 503 with the outbox id; the throttle slot is given back.
 */
export async function resendInvite(ctx: AuthContext, hubId: string, inviteId: string) {
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "resend invites");
  const invite = await managedInviteOrThrow(ctx.db, hub.id, role, inviteId);
  const now = ctx.now();
  assertInviteUsable(invite, now);
  if (!invite.email) throw new ApiError("no_email", "This invite has no e-mail address; share its link instead");
  const token = revealInviteToken(await serverSecret(ctx.db), invite.tokenEncrypted, invite.tokenHash);
  if (!token) throw new ApiError("conflict", "This invite's link can no longer be recovered (the instance secret changed); regenerate it");

  const earliest = new Date(now.getTime() - resendIntervalMs());
  const message = inviteMail({ ...invite, email: invite.email }, token, { hubName: hub.name, inviterName: ctx.user.name, senderId: ctx.user.id });
  const { count, row } = await ctx.db.$transaction(async (tx) => {
    // The caller's own role again, under the hub's membership lock: an admin demoted or removed since the
    // check above mails nothing in the hub's name once that change has returned.
    const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "resend invites");
    if (invite.role === "admin" && !can(current.role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can manage admin invites");
    // A link whose maker can no longer invite answers 410 to whoever opens it: mailing it again sends a dead link.
    await assertMakerCanGrant(
      tx,
      invite,
      "This invite's link no longer works: the member who made it can no longer invite to this hub with this role; regenerate it to issue a link of your own",
    );
    await assertInviteMailRoom(tx, ctx.user.id, now);
    const { count } = await tx.invite.updateMany({
      where: { id: invite.id, state: "active", tokenHash: invite.tokenHash, OR: [{ lastSentAt: null }, { lastSentAt: { lte: earliest } }] },
      data: { lastSentAt: now },
    });
    // Written under the sender's mail lock, so the hourly cap counts it exactly.
    return { count, row: count === 1 ? await enqueueMail(tx, message, now) : null };
  });
  if (count === 0) {
    const current = await ctx.db.invite.findUniqueOrThrow({ where: { id: invite.id } });
    assertInviteUsable(current, now);
    if (current.tokenHash !== invite.tokenHash) throw new ApiError("conflict", "The invite was regenerated meanwhile; reload and try again");
    const retryAfter = retryAfterSeconds((current.lastSentAt?.getTime() ?? 0) + resendIntervalMs() - now.getTime());
    throw new ApiError(
      "rate_limited",
      `This invite was e-mailed less than a minute ago; retry in ${retryAfter}s`,
      { limit: 1, retry_after: retryAfter },
      { "Retry-After": String(retryAfter) },
    );
  }
  const delivery = await deliverMail(ctx.db, row!, message);
  if (delivery.status === "failed") {
    await ctx.db.invite.updateMany({ where: { id: invite.id, lastSentAt: now }, data: { lastSentAt: invite.lastSentAt } });
    throw new ApiError("unavailable", "The mail server did not accept the invitation; try again later", { outbox_id: delivery.outbox_id });
  }
  // `status` and `email_enqueued_at` are what the Memax SDK reads back.
  return { ...serializeInvite({ ...invite, lastSentAt: now }, now), delivery, status: delivery.status, email_enqueued_at: now.toISOString() };
}

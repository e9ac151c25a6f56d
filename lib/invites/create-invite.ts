import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can } from "@/lib/api/permissions.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { assertTeamHub, hubPermissionOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { newId } from "@/lib/ids.ts";
import { INVITE_TTL_MS, MAX_ACTIVE_INVITES, type CreateInviteBody } from "./invite-fields.ts";
import { inviteToken } from "./invite-token.ts";
import { deliverMail, enqueueMail } from "@/lib/mail/send-mail.ts";
import { assertInviteMailRoom, inviteMail } from "./send-invite-email.ts";
import { serializeInvite } from "./serialize-invite.ts";
import { usableInviteWhere } from "./usable-invite-where.ts";
import { onInviteCreated } from "@/lib/notifications/notify.ts";

/**
 * Throws invite_limit_reached when the hub already has the maximum of usable
 * invites. Call under the hub's invite lock so concurrent creates count each other, and under
 * its membership lock (shared), so a maker's removal or demotion cannot change the count meanwhile.
 */
export async function assertInviteRoom(tx: DbClient, hubId: string, now: Date): Promise<void> {
  await lockForTransaction(tx, `invites:${hubId}`);
  const active = await tx.invite.count({ where: usableInviteWhere(hubId, now) });
  if (active >= MAX_ACTIVE_INVITES) {
    throw new ApiError("invite_limit_reached", `A hub can have at most ${MAX_ACTIVE_INVITES} active invites; revoke one first`, {
      limit: MAX_ACTIVE_INVITES,
    });
  }
}

/**
 * A join link for the hub (admins invite contributors and viewers, the owner
 * also admins); mailed when `email` is given. An invite addressed to a user id
 * records it when the account exists; an unknown id gives a plain link invite
 * (the Memax SDK's contract), so the answer does not reveal which ids exist.
 */
export async function createInvite(ctx: AuthContext, hubId: string, input: CreateInviteBody) {
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "invite members");
  assertTeamHub(hub, "shared");
  if (input.role === "admin" && !can(role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can invite admins");
  const now = ctx.now();
  const issued = inviteToken(await serverSecret(ctx.db));
  const invitee = input.inviteeUserId ? await ctx.db.user.findUnique({ where: { id: input.inviteeUserId }, select: { id: true } }) : null;
  const { invite, mail } = await ctx.db.$transaction(async (tx) => {
    // The inviter's own role again, under the hub's membership lock (before the invite lock, as
    // regenerate takes them): an admin demoted or removed since the check above makes no invite.
    const current = await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "invite members");
    if (input.role === "admin" && !can(current.role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can invite admins");
    await assertInviteRoom(tx, hub.id, now);
    if (input.email) await assertInviteMailRoom(tx, ctx.user.id, now);
    const created = await tx.invite.create({
      data: {
        id: newId(now.getTime()),
        hubId: hub.id,
        role: input.role,
        email: input.email?.toLowerCase(),
        tokenHash: issued.tokenHash,
        tokenEncrypted: issued.tokenEncrypted,
        state: "active",
        createdBy: ctx.user.id,
        createdAt: now,
        expiresAt: new Date(now.getTime() + INVITE_TTL_MS),
        lastSentAt: input.email ? now : null,
        // The id as asked, whether or not such a user exists: echoing only existing ones told any hub
        // owner which ids are accounts. Only an existing user is notified.
        inviteeUserId: input.inviteeUserId ?? null,
      },
    });
    // The outbox row in this transaction, under the sender's mail lock: the hourly cap counts it exactly.
    const message = created.email ? inviteMail({ ...created, email: created.email }, issued.token, { hubName: hub.name, inviterName: ctx.user.name, senderId: ctx.user.id }) : null;
    const mail = message ? { message, row: await enqueueMail(tx, message, now) } : null;
    // Last: its event holds the events lock until commit.
    await onInviteCreated(tx, created, hub, invitee?.id ?? null);
    return { invite: created, mail };
  });
  if (!mail) return serializeInvite(invite, now, issued.token);
  // The invite exists either way; a failed e-mail is reported, not fatal (the link is in this response).
  const delivery = await deliverMail(ctx.db, mail.row, mail.message);
  if (delivery.status === "failed") {
    // Nothing went out, so a resend must not be throttled.
    await ctx.db.invite.updateMany({ where: { id: invite.id, lastSentAt: now }, data: { lastSentAt: null } });
    return { ...serializeInvite({ ...invite, lastSentAt: null }, now, issued.token), delivery };
  }
  return { ...serializeInvite(invite, now, issued.token), delivery };
}

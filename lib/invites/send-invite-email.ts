import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { Invite } from "@/lib/db/generated/client.ts";
import { mailLeavesServer, type MailMessage } from "@/lib/mail/send-mail.ts";
import { inviteEmailsPerHour } from "./invite-fields.ts";
import { inviteUrl } from "./invite-token.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";

const HOUR_MS = 60 * 60 * 1000;

/** The invitation e-mail with the join link, sent for `senderId` (the member inviting). */
export function inviteMail(invite: Invite & { email: string }, token: string, context: { hubName: string; inviterName: string; senderId: string }): MailMessage {
  const article = /^[aeiou]/.test(invite.role) ? "an" : "a";
  return {
    to: invite.email,
    subject: `${context.inviterName} invited you to "${context.hubName}" on Engram`,
    text: [
      `${context.inviterName} invited you to join the hub "${context.hubName}" on Engram as ${article} ${invite.role}.`,
      "",
      "Open this link to accept the invitation:",
      inviteUrl(token),
      "",
      `The link works once and expires on ${invite.expiresAt.toISOString()}.`,
      "If you did not expect this invitation, ignore this e-mail.",
    ].join("\n"),
    kind: "invite",
    hubId: invite.hubId,
    senderId: context.senderId,
    secrets: [token],
  };
}

/**
 * Throws forbidden when mail leaves the server and the sender's own address was never proven, and rate_limited when the member
 * has sent inviteEmailsPerHour() invitation e-mails (creates and resends) in the last hour. Counts
 * their outbox rows, which outlive the hubs and invites they were about; under a lock per member,
 * held until the caller's transaction has written its own row, so concurrent requests in any of
 * their hubs count each other.
 */
export async function assertInviteMailRoom(tx: DbClient, senderId: string, now: Date): Promise<void> {
  await lockForTransaction(tx, `invite-mails:${senderId}`);
  // A password sign-up proves nothing (any address, made in a second): without this, throwaway accounts
  // would have the server mail whatever addresses they like, 100 an hour each, under its name. Without
  // SMTP nothing leaves the server (and no e-mail code can prove an address), so the outbox row is harmless.
  const sender = mailLeavesServer() ? await tx.user.findUnique({ where: { id: senderId }, select: { emailUnverified: true } }) : null;
  if (sender?.emailUnverified) {
    throw new ApiError(
      "forbidden",
      "Invitation e-mails need an account whose e-mail address is proven; sign in once with an e-mail code (or a provider that vouches for the address), or create a link invite without an email and share the link yourself",
    );
  }
  const limit = inviteEmailsPerHour();
  const sent = await tx.mailOutbox.findMany({
    where: { senderId, kind: "invite", createdAt: { gt: new Date(now.getTime() - HOUR_MS) } },
    select: { createdAt: true },
    orderBy: { createdAt: "asc" },
    take: limit,
  });
  if (sent.length < limit) return;
  const retryAfter = retryAfterSeconds(sent[0]!.createdAt.getTime() + HOUR_MS - now.getTime());
  throw new ApiError(
    "rate_limited",
    `At most ${limit} invitation e-mails may be sent per hour; retry in ${retryAfter}s or share a link invite (no email)`,
    { limit, retry_after: retryAfter },
    { "Retry-After": String(retryAfter) },
  );
}

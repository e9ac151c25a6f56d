import type { DbClient } from "@/lib/db/database.ts";
import type { Invite } from "@/lib/db/generated/client.ts";
import { sendMail, type MailDelivery } from "@/lib/mail/send-mail.ts";
import { inviteUrl } from "./invite-token.ts";

/** The invitation e-mail with the join link, through the mail outbox. */
export async function sendInviteEmail(
  db: DbClient,
  invite: Invite & { email: string },
  token: string,
  context: { hubName: string; inviterName: string },
  now: Date,
): Promise<MailDelivery> {
  const article = /^[aeiou]/.test(invite.role) ? "an" : "a";
  return sendMail(
    db,
    {
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
      secrets: [token],
    },
    now,
  );
}

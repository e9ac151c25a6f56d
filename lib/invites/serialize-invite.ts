import type { Invite } from "@/lib/db/generated/client.ts";
import { inviteUrl } from "./invite-token.ts";
import type { InviteObject } from "./invite-object.ts";

/** An active invite past its expiry reads as `expired`. */
export function inviteState(invite: Pick<Invite, "state" | "expiresAt">, now: Date): string {
  return invite.state === "active" && invite.expiresAt <= now ? "expired" : invite.state;
}

/**
 * The invite object; `token` and `invite_url` only right after create or
 * regenerate (the stored token is hashed). Engram's names and the Memax SDK's
 * (`invited_by`, `invitee_email`, `email_enqueued_at`, `accepted_by`) side by side.
 */
export function serializeInvite(invite: Invite, now: Date, token?: string): InviteObject {
  const lastSent = invite.lastSentAt?.toISOString() ?? null;
  return {
    id: invite.id,
    hub_id: invite.hubId,
    role: invite.role,
    email: invite.email,
    ...(token !== undefined && { token, invite_url: inviteUrl(token) }),
    created_by: invite.createdBy,
    invited_by: invite.createdBy,
    invitee_user_id: invite.inviteeUserId,
    invitee_email: invite.email,
    created_at: invite.createdAt.toISOString(),
    expires_at: invite.expiresAt.toISOString(),
    state: inviteState(invite, now),
    last_sent_at: lastSent,
    email_enqueued_at: lastSent,
    accepted_by: invite.acceptedBy,
    accepted_at: invite.acceptedAt?.toISOString() ?? null,
  };
}

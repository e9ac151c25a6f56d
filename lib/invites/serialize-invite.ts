import type { Invite } from "@/lib/db/generated/client.ts";
import { inviteUrl } from "./invite-token.ts";

/** An active invite past its expiry reads as `expired`. */
export function inviteState(invite: Pick<Invite, "state" | "expiresAt">, now: Date): string {
  return invite.state === "active" && invite.expiresAt <= now ? "expired" : invite.state;
}

/** The invite object; `token` and `invite_url` only right after create or regenerate. */
export function serializeInvite(invite: Invite, now: Date, token?: string) {
  return {
    id: invite.id,
    hub_id: invite.hubId,
    role: invite.role,
    email: invite.email,
    ...(token !== undefined && { token, invite_url: inviteUrl(token) }),
    created_by: invite.createdBy,
    created_at: invite.createdAt.toISOString(),
    expires_at: invite.expiresAt.toISOString(),
    state: inviteState(invite, now),
    last_sent_at: invite.lastSentAt?.toISOString() ?? null,
    accepted_at: invite.acceptedAt?.toISOString() ?? null,
  };
}

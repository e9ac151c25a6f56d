import { z } from "zod";
import { uuidField } from "@/lib/ids.ts";
import { MANAGED_ROLES } from "@/lib/api/permissions.ts";
import { positiveIntEnv, wholeNumberEnv } from "@/lib/config.ts";

/** Documented limits of invites (docs/hubs.md). The active cap also bounds GET /v1/hubs/:id/invites, which is one array. */
export const MAX_ACTIVE_INVITES = 20;
/**
 * Invitation e-mails one member may send per hour (creates and resends), across hubs: revoking frees
 * an active slot at once, so without it create-and-revoke would mail any address without end.
 * ENGRAM_INVITE_EMAILS_PER_HOUR, default 100 (a team's onboarding in one sitting).
 */
export function inviteEmailsPerHour(): number {
  return positiveIntEnv("ENGRAM_INVITE_EMAILS_PER_HOUR", 100);
}
export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/**
 * One e-mail per invite per minute, so resend cannot be used to spam an
 * address. ENGRAM_INVITE_RESEND_SECONDS changes the interval (the client
 * compatibility tests set 0 to resend right after creating).
 */
export function resendIntervalMs(): number {
  return wholeNumberEnv("ENGRAM_INVITE_RESEND_SECONDS", 60) * 1000;
}

const emailSchema = z.email("email must be an e-mail address").max(254);

export const createInviteBodySchema = z
  .strictObject({
    role: z.enum(MANAGED_ROLES).default("contributor"),
    email: emailSchema.optional(),
    // The Memax SDK's addressed invite: a user id wins over an e-mail when both are given.
    invitee: z.strictObject({ user_id: uuidField("invitee.user_id must be a user id").optional(), email: emailSchema.optional() }).optional(),
  })
  .transform(({ invitee, ...body }) => ({
    role: body.role,
    email: invitee?.user_id ? undefined : (invitee?.email ?? body.email),
    inviteeUserId: invitee?.user_id,
  }));
export type CreateInviteBody = z.output<typeof createInviteBodySchema>;

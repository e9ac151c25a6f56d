import { z } from "zod";
import { MANAGED_ROLES } from "@/lib/api/permissions.ts";

/** Documented limits of invites (docs/hubs.md). */
export const MAX_ACTIVE_INVITES = 20;
export const INVITE_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/** One e-mail per invite per minute, so resend cannot be used to spam an address. */
export const RESEND_INTERVAL_MS = 60_000;

export const createInviteBodySchema = z.strictObject({
  role: z.enum(MANAGED_ROLES).default("contributor"),
  email: z.email("email must be an e-mail address").max(254).optional(),
});
export type CreateInviteBody = z.output<typeof createInviteBodySchema>;

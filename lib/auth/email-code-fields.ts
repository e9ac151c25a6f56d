import { createHmac } from "node:crypto";
import { z } from "zod";
import { positiveIntEnv } from "@/lib/config.ts";

/** How long a code works, how soon another may be sent, how many per hour, how many wrong tries burn one. */
export const EMAIL_CODE_TTL_SECONDS = 600;
export const EMAIL_CODE_COOLDOWN_SECONDS = 60;
export const EMAIL_CODES_PER_HOUR = 5;
export const EMAIL_CODE_MAX_ATTEMPTS = 5;

/**
 * ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR (100): codes one client address may have mailed an hour, across
 * addresses. Each address gets five, but a client naming ever new addresses was held only by the
 * per-minute request bucket (60 mails a minute, to anyone); a NAT office signing in stays well under it.
 */
export function emailCodesPerClientHour(): number {
  return positiveIntEnv("ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR", 100);
}

const emailSchema = z
  .email("email must be an e-mail address")
  .max(320)
  .transform((email) => email.trim().toLowerCase());

export const requestEmailCodeBodySchema = z.object({
  email: z.string().trim().pipe(emailSchema),
  // Where `memax login --email`-style clients wait: the same loopback rule as the CLI's browser sign-in.
  redirect_uri: z.string().max(2000).optional(),
  // Accepted for Memax's clients; an invite is accepted from its link or the bell once signed in.
  invite_token: z.string().max(500).optional(),
});
export type RequestEmailCodeBody = z.output<typeof requestEmailCodeBodySchema>;

export const verifyEmailCodeBodySchema = z.object({
  email: z.string().trim().pipe(emailSchema),
  code: z.string().trim().regex(/^\d{6}$/, "code is the six digits from the e-mail"),
});
export type VerifyEmailCodeBody = z.output<typeof verifyEmailCodeBodySchema>;

/** A code is stored as an HMAC under the server secret, bound to its address: a leaked table row is no code. */
export function emailCodeHash(secret: Buffer, email: string, code: string): string {
  return createHmac("sha256", secret).update(`email-code:${email}:${code}`).digest("hex");
}

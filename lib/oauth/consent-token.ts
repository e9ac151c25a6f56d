import { sign, verify } from "@/lib/api/server-secret.ts";
import { AUTHORIZE_FIELDS } from "./consent-page.ts";

/** A consent form is good for this long after it was shown. */
export const CONSENT_TTL_MS = 15 * 60 * 1000;

function payload(userId: string, params: URLSearchParams, issuedAt: number): string {
  // Every field the form carries: one left out (scope) could be changed under a valid token, and a
  // read-only request became one for write. Absent (null) is told from empty, as the checks tell them.
  const fields = AUTHORIZE_FIELDS.map((name) => params.get(name));
  return `consent:${userId}:${issuedAt}:${JSON.stringify(fields)}`;
}

/** Binds the consent form to this user and this exact authorization request (CSRF). */
export function consentToken(secret: Buffer, userId: string, params: URLSearchParams, nowMs: number): string {
  return `${nowMs}.${sign(secret, payload(userId, params, nowMs), 32)}`;
}

export function checkConsentToken(secret: Buffer, userId: string, params: URLSearchParams, token: string | null, nowMs: number): boolean {
  const [issued, signature, extra] = (token ?? "").split(".");
  const issuedAt = Number(issued);
  if (!signature || extra !== undefined || !Number.isSafeInteger(issuedAt)) return false;
  if (nowMs - issuedAt > CONSENT_TTL_MS || issuedAt > nowMs + 60_000) return false;
  return verify(secret, payload(userId, params, issuedAt), signature, 32);
}

/** When a consent token stops being accepted (its form expires), or null when it is not one. */
export function consentTokenExpiry(token: string): Date | null {
  const issuedAt = Number(token.split(".")[0]);
  return Number.isSafeInteger(issuedAt) ? new Date(issuedAt + CONSENT_TTL_MS) : null;
}

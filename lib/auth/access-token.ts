import { sign, verify } from "@/lib/api/server-secret.ts";

export const ACCESS_TOKEN_PREFIX = "eat_";
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

/** What an OAuth access token carries: who, through which grant, for which resource (RFC 8707), until when. */
export interface AccessTokenClaims {
  userId: string;
  grantId: string;
  resource: string;
  /** Set when a refresh asked for less than its grant's scope (RFC 6749 §6); absent, the grant's scope applies. */
  scope?: string;
}

/**
 * A short-lived signed bearer token, issued only by the OAuth token endpoint. It names its
 * grant, so revoking the grant (or a refresh-token replay) ends it before it expires.
 */
export function issueAccessToken(secret: Buffer, claims: AccessTokenClaims, nowMs: number, ttlSeconds = ACCESS_TOKEN_TTL_SECONDS): string {
  const payload = Buffer.from(
    JSON.stringify({ sub: claims.userId, gid: claims.grantId, aud: claims.resource, ...(claims.scope !== undefined && { scp: claims.scope }), exp: Math.floor(nowMs / 1000) + ttlSeconds }),
  ).toString("base64url");
  return `${ACCESS_TOKEN_PREFIX}${payload}.${sign(secret, `at:${payload}`, 32)}`;
}

export type AccessTokenCheck = ({ ok: true } & AccessTokenClaims) | { ok: false; reason: "invalid" | "expired" };

export function verifyAccessToken(secret: Buffer, token: string, nowMs: number): AccessTokenCheck {
  const [payload, signature, extra] = token.slice(ACCESS_TOKEN_PREFIX.length).split(".");
  if (!payload || !signature || extra !== undefined || !verify(secret, `at:${payload}`, signature, 32)) return { ok: false, reason: "invalid" };
  try {
    const { sub, gid, aud, scp, exp } = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as Record<string, unknown>;
    if (typeof sub !== "string" || typeof gid !== "string" || typeof aud !== "string" || typeof exp !== "number") return { ok: false, reason: "invalid" };
    if (scp !== undefined && typeof scp !== "string") return { ok: false, reason: "invalid" };
    if (exp * 1000 <= nowMs) return { ok: false, reason: "expired" };
    return { ok: true, userId: sub, grantId: gid, resource: aud, ...(scp !== undefined && { scope: scp }) };
  } catch {
    return { ok: false, reason: "invalid" };
  }
}

import { sign, verify } from "@/lib/api/server-secret.ts";

export const ACCESS_TOKEN_PREFIX = "eat_";
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

/** A short-lived signed bearer token (the OAuth flow and the dashboard use it). */
export function issueAccessToken(secret: Buffer, userId: string, nowMs: number, ttlSeconds = ACCESS_TOKEN_TTL_SECONDS): string {
  const payload = Buffer.from(JSON.stringify({ sub: userId, exp: Math.floor(nowMs / 1000) + ttlSeconds })).toString("base64url");
  return `${ACCESS_TOKEN_PREFIX}${payload}.${sign(secret, `at:${payload}`, 32)}`;
}

export type AccessTokenCheck = { ok: true; userId: string } | { ok: false; reason: "invalid" | "expired" };

export function verifyAccessToken(secret: Buffer, token: string, nowMs: number): AccessTokenCheck {
  const [payload, signature, extra] = token.slice(ACCESS_TOKEN_PREFIX.length).split(".");
  if (!payload || !signature || extra !== undefined || !verify(secret, `at:${payload}`, signature, 32)) return { ok: false, reason: "invalid" };
  try {
    const { sub, exp } = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { sub: unknown; exp: unknown };
    if (typeof sub !== "string" || typeof exp !== "number") return { ok: false, reason: "invalid" };
    if (exp * 1000 <= nowMs) return { ok: false, reason: "expired" };
    return { ok: true, userId: sub };
  } catch {
    return { ok: false, reason: "invalid" };
  }
}

import { createHmac } from "node:crypto";
import { decode, type JWT } from "next-auth/jwt";
import { FULL_ACCESS, type AuthUser, type Credential } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";

/** next-auth's session cookie; the `__Secure-` form is used when the site is served over https. */
export const SESSION_COOKIE_NAMES = ["__Secure-next-auth.session-token", "next-auth.session-token"] as const;

/** Browser sessions last 30 days (next-auth's default), refreshed while in use. */
export const SESSION_MAX_AGE_SECONDS = 30 * 24 * 60 * 60;

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The key next-auth encrypts session cookies with. NEXTAUTH_SECRET wins; otherwise it is
 * derived from the instance signing secret, so a fresh install needs no configuration and
 * every process and restart agrees.
 */
export async function sessionSecret(db: Db): Promise<string> {
  const fromEnv = process.env.NEXTAUTH_SECRET || process.env.AUTH_SECRET;
  if (fromEnv) return fromEnv;
  return createHmac("sha256", await serverSecret(db)).update("engram:nextauth-session").digest("base64url");
}

/** The session token from a Cookie header, reassembling next-auth's chunked form (name.0, name.1…). */
export function sessionTokenFrom(cookieHeader: string | null): string | undefined {
  if (!cookieHeader) return undefined;
  const cookies = parseCookies(cookieHeader);
  for (const name of SESSION_COOKIE_NAMES) {
    if (cookies[name]) return cookies[name];
    const chunks: string[] = [];
    for (let i = 0; cookies[`${name}.${i}`] !== undefined; i++) chunks.push(cookies[`${name}.${i}`]!);
    if (chunks.length > 0) return chunks.join("");
  }
  return undefined;
}

function parseCookies(header: string): Record<string, string> {
  const cookies: Record<string, string> = {};
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    try {
      value = decodeURIComponent(value);
    } catch {
      // Keep the raw value; decoding the token will reject it if it is bad.
    }
    if (name && !(name in cookies)) cookies[name] = value;
  }
  return cookies;
}

export function hasSessionCookie(req: Request): boolean {
  return sessionTokenFrom(req.headers.get("cookie")) !== undefined;
}

/**
 * The account of a valid, unexpired session token, or undefined. The row that validates the
 * session is the row the caller needs: one read of the user, not one to check and one to load.
 */
export async function sessionAccount(db: Db, token: string | undefined): Promise<AuthUser | undefined> {
  return (await sessionOf(db, token))?.user;
}

/** sessionAccount with what identifies the session (Credential["session"]). */
export async function sessionOf(db: Db, token: string | undefined): Promise<{ user: AuthUser; session: NonNullable<Credential["session"]> } | undefined> {
  if (!token) return undefined;
  try {
    const payload = await decode({ token, secret: await sessionSecret(db) });
    const user = payload ? await sessionPayloadAccount(db, payload) : undefined;
    return user && { user, session: { ids: sessionIds(payload!), signedInAt: signedInAt(payload!) } };
  } catch {
    return undefined;
  }
}

function sessionIds(payload: JWT): string[] {
  return [payload.jti, payload.sid].filter((id): id is string => typeof id === "string");
}

/**
 * The account a decoded session token still signs in, or undefined: also asked before next-auth
 * re-issues a token (lib/auth/session-options.ts), so an ended session cannot come back as a new one.
 */
export async function sessionPayloadAccount(db: Db, payload: JWT): Promise<AuthUser | undefined> {
  if (typeof payload.sub !== "string") return undefined;
  // A session signed out of (lib/auth/end-session.ts) stays ended, whoever still holds its cookie or
  // one re-issued from it; one issued before the account's cut-off (a claim ended them) no longer
  // counts. Both read at once.
  const [ended, user] = await Promise.all([
    endedAmong(db, sessionIds(payload)),
    db.user.findUnique({ where: { id: payload.sub }, select: { id: true, email: true, name: true, sessionsValidAfter: true } }),
  ]);
  if (ended || !user || cutOff(user.sessionsValidAfter, signedInAt(payload))) return undefined;
  return { id: user.id, email: user.email, name: user.name };
}

/** Whether any of a session's ids (its cookie's jti, its sign-in's sid) was signed out of. */
async function endedAmong(db: DbClient, ids: readonly string[]): Promise<boolean> {
  return ids.length > 0 && (await db.endedSession.findFirst({ where: { jti: { in: [...ids] } }, select: { jti: true } })) !== null;
}

/**
 * A sign-in checked before the account's cut-off, or in the same millisecond (a claim ended every
 * session until then; one checked in its millisecond may have been checked before it). The claimant's
 * own sign-in is stamped a millisecond past its claim (lib/auth/session-options.ts).
 */
function cutOff(sessionsValidAfter: Date | null, signedInAtMs: number): boolean {
  return sessionsValidAfter !== null && signedInAtMs <= sessionsValidAfter.getTime();
}

/**
 * Whether a session (Credential["session"]) still counts: not signed out of, and not from before the
 * account's cut-off (a claim). Read again by writes that must not outlive it (lib/auth/create-api-key.ts).
 */
export async function sessionStillValid(db: DbClient, userId: string, session: NonNullable<Credential["session"]>): Promise<boolean> {
  const [ended, user] = await Promise.all([endedAmong(db, session.ids), db.user.findUnique({ where: { id: userId }, select: { sessionsValidAfter: true } })]);
  return !ended && user !== null && !cutOff(user.sessionsValidAfter, session.signedInAt);
}

/**
 * When the sign-in behind a token checked its password or provider, in ms (lib/auth/session-options.ts
 * stamps it). iat alone is whole seconds and taken after that check, so a claim in the same second,
 * or between the check and the cookie, left a squatter's session valid. A token without the stamp
 * (issued before it) is given the end of its iat's second, as whole seconds were compared before.
 */
function signedInAt(payload: JWT): number {
  if (typeof payload.signed_in_at === "number") return payload.signed_in_at;
  return typeof payload.iat === "number" ? payload.iat * 1000 + 999 : 0;
}

/** The user id inside a valid, unexpired session token, or undefined. */
export async function sessionUserId(db: Db, token: string | undefined): Promise<string | undefined> {
  return (await sessionAccount(db, token))?.id;
}

/**
 * Authenticates a /v1 request by the dashboard's session cookie. Cookies ride along on
 * cross-site requests, so writes must prove they come from our own pages.
 */
export async function resolveSession(db: Db, req: Request, _now: Date): Promise<{ user: AuthUser; credential: Credential }> {
  const found = await sessionOf(db, sessionTokenFrom(req.headers.get("cookie")));
  if (!found) throw new ApiError("unauthorized", "Your session has expired or is invalid; sign in again");
  if (!SAFE_METHODS.has(req.method.toUpperCase())) assertSameOrigin(req);
  return { user: found.user, credential: { type: "session", ...FULL_ACCESS, session: found.session } };
}

/**
 * Same-origin proof for cookie-authenticated writes: browsers send Sec-Fetch-Site on every
 * request (older ones at least Origin on non-GET). API-key requests never reach this.
 */
export function assertSameOrigin(req: Request): void {
  const refuse = () =>
    new ApiError("forbidden", "Cross-site request refused: cookie-authenticated changes must come from the Engram dashboard itself; API clients should send an API key");
  const site = req.headers.get("sec-fetch-site");
  if (site) {
    if (site === "same-origin") return;
    throw refuse();
  }
  const origin = req.headers.get("origin");
  if (!origin) throw refuse();
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    throw refuse();
  }
  if (!allowedHosts(req).includes(originHost)) throw refuse();
}

function allowedHosts(req: Request): string[] {
  const hosts = [req.headers.get("x-forwarded-host"), req.headers.get("host"), new URL(req.url).host];
  for (const configured of [process.env.ENGRAM_PUBLIC_URL, process.env.NEXTAUTH_URL]) {
    if (!configured) continue;
    try {
      hosts.push(new URL(configured).host);
    } catch {
      // A malformed setting grants nothing.
    }
  }
  return hosts.filter((host): host is string => Boolean(host));
}

/** Browser forms posted from another site are refused; non-browser clients send no such headers. */
export function assertNotCrossSite(req: Request): void {
  const site = req.headers.get("sec-fetch-site");
  if (site && site !== "same-origin" && site !== "none") {
    throw new ApiError("forbidden", "Cross-site request refused: use the Engram sign-up page");
  }
  if (!site && req.headers.get("origin")) assertSameOrigin(req);
}

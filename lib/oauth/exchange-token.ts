import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { ACCESS_TOKEN_TTL_SECONDS, issueAccessToken } from "@/lib/auth/access-token.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import type { Db } from "@/lib/db/database.ts";
import { findClient } from "./find-client.ts";
import { OAuthError } from "./oauth-error.ts";

export const REFRESH_TOKEN_PREFIX = "ert_";
export const REFRESH_TOKEN_TTL_MS = 30 * 24 * 60 * 60 * 1000;
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

export interface TokenResponse {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  refresh_token: string;
  scope: string;
}

/** POST /oauth/token: authorization_code (with PKCE) or refresh_token (rotating). */
/** `address`: the caller's, for the per-address cap on new metadata-document clients (register-client.ts). */
export async function exchangeToken(db: Db, params: URLSearchParams, now: Date, address?: string): Promise<TokenResponse> {
  const grantType = params.get("grant_type");
  if (grantType === "authorization_code") return redeemCode(db, params, now, address);
  if (grantType === "refresh_token") return refresh(db, params, now);
  if (!grantType) throw new OAuthError("invalid_request", "grant_type is required");
  throw new OAuthError("unsupported_grant_type", `grant_type ${grantType} is not supported; use authorization_code or refresh_token`);
}

function required(params: URLSearchParams, name: string): string {
  const value = params.get(name);
  if (!value) throw new OAuthError("invalid_request", `${name} is required`);
  return value;
}

function pkceMatches(verifier: string, challenge: string): boolean {
  const computed = Buffer.from(createHash("sha256").update(verifier).digest("base64url"));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/** Why a code or refresh token was refused; the REST form of the exchange (lib/oauth/cli-login.ts) answers each with its own status. */
export type GrantFailure = "invalid" | "used" | "expired" | "revoked";

export class GrantError extends OAuthError {
  constructor(
    readonly reason: GrantFailure,
    description: string,
  ) {
    super("invalid_grant", description);
  }
}

/**
 * Claims a single-use code issued to `clientId`. A second redemption finds it used and revokes
 * what the first one got (RFC 6749 §4.1.2). The caller then checks what the request must match.
 */
export async function claimCode(db: Db, code: string, clientId: string, now: Date, options: { withoutPkce?: boolean } = {}) {
  const row = await db.oAuthCode.findUnique({ where: { codeHash: hashSecret(code) }, include: { grant: true } });
  if (!row || row.grant.clientId !== clientId) throw new GrantError("invalid", "The authorization code is invalid");
  // Checked before the claim, so a code sent to the wrong endpoint is not used up there.
  if (options.withoutPkce && row.codeChallenge) throw new GrantError("invalid", "This code was issued with PKCE: redeem it at /oauth/token with its code_verifier");
  const claimed = await db.oAuthCode.updateMany({ where: { codeHash: row.codeHash, usedAt: null }, data: { usedAt: now } });
  if (claimed.count !== 1) {
    await revokeGrant(db, row.grantId, "authorization_code_reuse", now);
    throw new GrantError("used", "The authorization code was already used; the tokens issued for it are revoked");
  }
  if (row.expiresAt <= now) throw new GrantError("expired", "The authorization code has expired; start the sign-in again");
  if (row.grant.revokedAt) throw new GrantError("revoked", "The grant was revoked");
  return row;
}

async function redeemCode(db: Db, params: URLSearchParams, now: Date, address?: string): Promise<TokenResponse> {
  const code = required(params, "code");
  const clientId = required(params, "client_id");
  const verifier = required(params, "code_verifier");
  const redirectUri = params.get("redirect_uri");
  // A client_id naming a new metadata document is read (and counted against its caller's cap) here too.
  await findClient(db, clientId, now, address);
  const row = await claimCode(db, code, clientId, now);
  if (redirectUri !== null && redirectUri !== row.redirectUri) throw new OAuthError("invalid_grant", "redirect_uri does not match the authorization request");
  if (redirectUri === null && params.has("redirect_uri")) throw new OAuthError("invalid_grant", "redirect_uri does not match the authorization request");
  // A code issued without PKCE (the built-in CLI client's) has an empty challenge, which no verifier matches.
  if (!VERIFIER.test(verifier) || !pkceMatches(verifier, row.codeChallenge)) throw new OAuthError("invalid_grant", "code_verifier does not match the code_challenge");
  const resource = params.get("resource");
  if (resource !== null && resource !== row.resource) throw new OAuthError("invalid_target", "resource does not match the authorization request");
  return issueTokens(db, row.grant, now);
}

/**
 * How long after a refresh token's use the same client may present it again without ending the
 * grant. Several processes sharing one stored token (Memax CLI commands run at once on a machine)
 * refresh together; all but one find it used a moment later. Ending the grant then would sign the
 * user out, the winner's fresh tokens included. Inside the window the loser is only refused (it
 * re-reads the stored tokens, or keeps its still-valid access token); after it, reuse is a leak.
 */
export const REFRESH_REUSE_GRACE_MS = 10_000;

/**
 * Rotation: each refresh token works once. Presenting a used one means it leaked: end the grant
 * (unless it was used within REFRESH_REUSE_GRACE_MS, see there).
 * `accepts` refuses a request the grant cannot serve before the token is spent, so a client that
 * corrects its request retries with the same token instead of ending its grant as a replay.
 */
export async function rotateRefreshToken(db: Db, token: string, clientId: string, now: Date, accepts: (grant: { resource: string; scope: string }) => void = () => {}) {
  const row = await db.oAuthRefreshToken.findUnique({ where: { tokenHash: hashSecret(token) }, include: { grant: true } });
  if (!row || row.grant.clientId !== clientId) throw new GrantError("invalid", "The refresh token is invalid");
  if (row.grant.revokedAt) throw new GrantError("revoked", "The grant was revoked; sign in again");
  if (!row.usedAt) accepts(row.grant);
  const claimed = await db.oAuthRefreshToken.updateMany({ where: { tokenHash: row.tokenHash, usedAt: null }, data: { usedAt: now } });
  if (claimed.count !== 1) {
    // Read again when this request lost the race: the row read above still showed it unused.
    const usedAt = row.usedAt ?? (await db.oAuthRefreshToken.findUnique({ where: { tokenHash: row.tokenHash }, select: { usedAt: true } }))?.usedAt;
    // A concurrent request may have claimed it at a `now` slightly after this one's: a negative gap is inside the window.
    if (usedAt && now.getTime() - usedAt.getTime() < REFRESH_REUSE_GRACE_MS) {
      throw new GrantError("used", "The refresh token was just used by another refresh of this client; use the tokens that refresh received");
    }
    await revokeGrant(db, row.grantId, "refresh_token_reuse", now);
    throw new GrantError("used", "The refresh token was already used; the grant is revoked, sign in again");
  }
  if (row.expiresAt <= now) throw new GrantError("expired", "The refresh token has expired; sign in again");
  return row.grant;
}

async function refresh(db: Db, params: URLSearchParams, now: Date): Promise<TokenResponse> {
  const token = required(params, "refresh_token");
  const clientId = required(params, "client_id");
  const resource = params.get("resource");
  const scope = params.get("scope");
  const grant = await rotateRefreshToken(db, token, clientId, now, (grant) => {
    if (resource !== null && resource !== grant.resource) throw new OAuthError("invalid_target", "resource does not match the grant");
    if (scope) {
      const granted = grant.scope.split(" ");
      if (scope.split(" ").some((s) => s && !granted.includes(s) && (s === "read" || s === "write"))) throw new OAuthError("invalid_scope", "A refresh cannot widen the granted scope");
    }
  });
  return issueTokens(db, grant, now);
}

export async function issueTokens(db: Db, grant: { id: string; userId: string; resource: string; scope: string }, now: Date): Promise<TokenResponse> {
  const refreshToken = `${REFRESH_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  await db.oAuthRefreshToken.create({
    data: { tokenHash: hashSecret(refreshToken), grantId: grant.id, createdAt: now, expiresAt: new Date(now.getTime() + REFRESH_TOKEN_TTL_MS) },
  });
  const accessToken = issueAccessToken(await serverSecret(db), { userId: grant.userId, grantId: grant.id, resource: grant.resource }, now.getTime());
  return { access_token: accessToken, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, refresh_token: refreshToken, scope: grant.scope };
}

/** Ends a grant: its access tokens stop working at once, its refresh tokens are refused. */
export async function revokeGrant(db: Db, grantId: string, reason: string, now: Date): Promise<boolean> {
  const result = await db.oAuthGrant.updateMany({ where: { id: grantId, revokedAt: null }, data: { revokedAt: now, revokedReason: reason } });
  return result.count === 1;
}

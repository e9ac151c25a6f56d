import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { ACCESS_TOKEN_TTL_SECONDS, issueAccessToken } from "@/lib/auth/access-token.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { findClient } from "./find-client.ts";
import { OAuthError } from "./oauth-error.ts";
import { OAUTH_SCOPES } from "./oauth-metadata.ts";

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
 * What a claim decided: the grant to issue for (and the scope of the access token, when a refresh
 * asked for less than the grant's), or the refusal to throw once the transaction ends.
 */
type Claimed<T> = { row: T; scope?: string } | { refusal: OAuthError; revoke?: { grantId: string; reason: string } };

/**
 * Runs a claim and the new refresh token's insert in one transaction, with the claimed row locked
 * (FOR UPDATE) and its grant shared (FOR SHARE): a concurrent claim of the same code or token waits
 * and then finds it used, a revocation waits for the pair (or the claim for it, and then refuses),
 * and a failure anywhere leaves the code or token unspent for the retry. A refusal may still commit
 * what the claim wrote (a code is used up by a wrong verifier); a replay's revocation runs after the
 * commit, so two replays of one grant never wait on each other's share of its row.
 */
async function claimAndIssue<T extends { grant: { id: string; userId: string; resource: string; scope: string } }>(
  db: Db,
  now: Date,
  claim: (tx: DbClient) => Promise<Claimed<T>>,
  within?: DbClient,
): Promise<{ row: T; tokens: TokenResponse }> {
  const secret = await serverSecret(db);
  const refreshToken = `${REFRESH_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  const issue = async (tx: DbClient) => {
    const result = await claim(tx);
    if ("row" in result) {
      await tx.oAuthRefreshToken.create({
        data: { tokenHash: hashSecret(refreshToken), grantId: result.row.grant.id, createdAt: now, expiresAt: new Date(now.getTime() + REFRESH_TOKEN_TTL_MS) },
      });
    }
    return result;
  };
  const claimed = await (within ? issue(within) : db.$transaction(issue));
  if ("refusal" in claimed) {
    // Inside a caller's transaction the refusal rolls it all back; a revocation through `db` would
    // wait on the share of the grant that transaction holds.
    if (claimed.revoke && !within) await revokeGrant(db, claimed.revoke.grantId, claimed.revoke.reason, now);
    throw claimed.refusal;
  }
  return { row: claimed.row, tokens: tokenResponse(secret, claimed.row.grant, refreshToken, now, claimed.scope) };
}

/** Checks run on a claimed code before its tokens are issued; a throw refuses them (the code stays used). */
export type CodeCheck = (row: { redirectUri: string; codeChallenge: string; resource: string }) => void;

/**
 * Redeems a single-use code issued to `clientId` for a token pair. A second redemption finds it
 * used and revokes what the first one got (RFC 6749 §4.1.2). `check` refuses a request the code
 * does not match. `tx`: the caller's transaction to redeem in (one that made the code), instead of one of its own.
 */
export async function redeemCodeForTokens(
  db: Db,
  code: string,
  clientId: string,
  now: Date,
  options: { withoutPkce?: boolean; check?: CodeCheck; tx?: DbClient } = {},
): Promise<TokenResponse> {
  const codeHash = hashSecret(code);
  const { tokens } = await claimAndIssue(db, now, async (tx) => {
    await tx.$executeRaw`SELECT 1 FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = ${codeHash} FOR UPDATE OF c FOR SHARE OF g`;
    const row = await tx.oAuthCode.findUnique({ where: { codeHash }, include: { grant: true } });
    if (!row || row.grant.clientId !== clientId) return { refusal: new GrantError("invalid", "The authorization code is invalid") };
    // Checked before the claim, so a code sent to the wrong endpoint is not used up there.
    if (options.withoutPkce && row.codeChallenge) {
      return { refusal: new GrantError("invalid", "This code was issued with PKCE: redeem it at /oauth/token with its code_verifier") };
    }
    if (row.usedAt) {
      return {
        refusal: new GrantError("used", "The authorization code was already used; the tokens issued for it are revoked"),
        revoke: { grantId: row.grantId, reason: "authorization_code_reuse" },
      };
    }
    // A code issued without PKCE (the built-in CLI client's) matches no verifier: refused here without
    // the claim, so a stray try at /oauth/token leaves it to the CLI's own exchange. After the used
    // check, so a replay is still one wherever it is sent.
    if (!options.withoutPkce && !row.codeChallenge) {
      return { refusal: new GrantError("invalid", "This code was issued without PKCE: redeem it at /v1/auth/exchange") };
    }
    await tx.oAuthCode.update({ where: { codeHash }, data: { usedAt: now } });
    if (row.expiresAt <= now) return { refusal: new GrantError("expired", "The authorization code has expired; start the sign-in again") };
    if (row.grant.revokedAt) return { refusal: new GrantError("revoked", "The grant was revoked") };
    try {
      options.check?.(row);
    } catch (error) {
      if (error instanceof OAuthError) return { refusal: error };
      throw error;
    }
    return { row };
  }, options.tx);
  return tokens;
}

async function redeemCode(db: Db, params: URLSearchParams, now: Date, address?: string): Promise<TokenResponse> {
  const code = required(params, "code");
  const clientId = required(params, "client_id");
  const verifier = required(params, "code_verifier");
  const redirectUri = params.get("redirect_uri");
  // A client_id naming a new metadata document is read (and counted against its caller's cap) here too.
  await findClient(db, clientId, now, address);
  return redeemCodeForTokens(db, code, clientId, now, {
    check: (row) => {
      if (redirectUri !== null && redirectUri !== row.redirectUri) throw new OAuthError("invalid_grant", "redirect_uri does not match the authorization request");
      if (redirectUri === null && params.has("redirect_uri")) throw new OAuthError("invalid_grant", "redirect_uri does not match the authorization request");
      if (!VERIFIER.test(verifier) || !pkceMatches(verifier, row.codeChallenge)) throw new OAuthError("invalid_grant", "code_verifier does not match the code_challenge");
      const resource = params.get("resource");
      if (resource !== null && resource !== row.resource) throw new OAuthError("invalid_target", "resource does not match the authorization request");
    },
  });
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
 * Rotation: each refresh token works once, for one new pair. Presenting a used one means it
 * leaked: end the grant (unless it was used within REFRESH_REUSE_GRACE_MS, see there).
 * `accepts` refuses a request the grant cannot serve before the token is spent, so a client that
 * corrects its request retries with the same token instead of ending its grant as a replay; what it
 * returns is the new access token's scope, when narrower than the grant's.
 */
export async function refreshGrantTokens(
  db: Db,
  token: string,
  clientId: string,
  now: Date,
  accepts: (grant: { resource: string; scope: string }) => string | undefined = () => undefined,
): Promise<TokenResponse> {
  const tokenHash = hashSecret(token);
  const { tokens } = await claimAndIssue(db, now, async (tx) => {
    await tx.$executeRaw`SELECT 1 FROM oauth_refresh_tokens t JOIN oauth_grants g ON g.id = t.grant_id WHERE t.token_hash = ${tokenHash} FOR UPDATE OF t FOR SHARE OF g`;
    const row = await tx.oAuthRefreshToken.findUnique({ where: { tokenHash }, include: { grant: true } });
    if (!row || row.grant.clientId !== clientId) return { refusal: new GrantError("invalid", "The refresh token is invalid") };
    if (row.grant.revokedAt) return { refusal: new GrantError("revoked", "The grant was revoked; sign in again") };
    if (row.usedAt) {
      // A concurrent request may have claimed it at a `now` slightly after this one's: a negative gap is inside the window.
      if (now.getTime() - row.usedAt.getTime() < REFRESH_REUSE_GRACE_MS) {
        return { refusal: new GrantError("used", "The refresh token was just used by another refresh of this client; use the tokens that refresh received") };
      }
      return {
        refusal: new GrantError("used", "The refresh token was already used; the grant is revoked, sign in again"),
        revoke: { grantId: row.grantId, reason: "refresh_token_reuse" },
      };
    }
    const scope = accepts(row.grant);
    if (row.expiresAt <= now) return { refusal: new GrantError("expired", "The refresh token has expired; sign in again") };
    await tx.oAuthRefreshToken.update({ where: { tokenHash }, data: { usedAt: now } });
    return { row, scope };
  });
  return tokens;
}

async function refresh(db: Db, params: URLSearchParams, now: Date): Promise<TokenResponse> {
  const token = required(params, "refresh_token");
  const clientId = required(params, "client_id");
  const resource = params.get("resource");
  const scope = params.get("scope");
  return refreshGrantTokens(db, token, clientId, now, (grant) => {
    if (resource !== null && resource !== grant.resource) throw new OAuthError("invalid_target", "resource does not match the grant");
    return narrowedScope(grant.scope, scope);
  });
}

/**
 * RFC 6749 §6: a refresh may ask for part of the grant's scope, and its access token then holds only
 * that part; the refresh token keeps the whole, so a later refresh may ask for all of it again.
 * Scopes this server does not know are ignored, as at /oauth/authorize; a request naming none of
 * read/write gets the grant's scope.
 */
function narrowedScope(granted: string, requested: string | null): string | undefined {
  const asked = (requested ?? "").split(" ").filter((s) => (OAUTH_SCOPES as readonly string[]).includes(s));
  if (!asked.length) return undefined;
  const grantedScopes = granted.split(" ");
  if (asked.some((s) => !grantedScopes.includes(s))) throw new OAuthError("invalid_scope", "A refresh cannot widen the granted scope");
  const scope = grantedScopes.filter((s) => asked.includes(s));
  return scope.length === grantedScopes.length ? undefined : scope.join(" ");
}

function tokenResponse(secret: Buffer, grant: { id: string; userId: string; resource: string; scope: string }, refreshToken: string, now: Date, scope?: string): TokenResponse {
  const accessToken = issueAccessToken(secret, { userId: grant.userId, grantId: grant.id, resource: grant.resource, ...(scope !== undefined && { scope }) }, now.getTime());
  return { access_token: accessToken, token_type: "Bearer", expires_in: ACCESS_TOKEN_TTL_SECONDS, refresh_token: refreshToken, scope: scope ?? grant.scope };
}

/** Ends a grant: its access tokens stop working at once, its refresh tokens are refused. */
export async function revokeGrant(db: Db, grantId: string, reason: string, now: Date): Promise<boolean> {
  const result = await db.oAuthGrant.updateMany({ where: { id: grantId, revokedAt: null }, data: { revokedAt: now, revokedReason: reason } });
  return result.count === 1;
}

import { ApiError } from "@/lib/api/errors.ts";
import { KEY_SCOPES, type AuthUser, type Credential, type KeyScope } from "@/lib/api/context.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Db } from "@/lib/db/database.ts";
import { ACCESS_TOKEN_PREFIX, verifyAccessToken } from "./access-token.ts";
import { hashSecret } from "./hash-secret.ts";
import { API_KEY_PREFIX } from "./create-api-key.ts";

/** last_used_at is refreshed at most this often, so auth stays one indexed read. */
const LAST_USED_RESOLUTION_MS = 60_000;

export interface ResolveOptions {
  /**
   * The resource identifiers (RFC 8707) this endpoint answers for. OAuth access tokens are
   * bound to the resource they were issued for and are refused anywhere else.
   */
  resources?: readonly string[];
}

/** Turns an `Authorization: Bearer …` header into the calling user, or throws unauthorized. */
export async function resolveCredential(
  db: Db,
  authorization: string | null,
  now: Date,
  options: ResolveOptions = {},
): Promise<{ user: AuthUser; credential: Credential }> {
  const match = authorization?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match) throw new ApiError("unauthorized", "Missing credential: send Authorization: Bearer <api key>");
  const token = match[1]!;

  if (token.startsWith(ACCESS_TOKEN_PREFIX)) {
    const check = verifyAccessToken(await serverSecret(db), token, now.getTime());
    if (!check.ok) throw new ApiError("unauthorized", check.reason === "expired" ? "Access token expired" : "Invalid access token");
    if (!options.resources?.includes(check.resource)) {
      throw new ApiError("unauthorized", `This access token was issued for ${check.resource}; it is not valid here`);
    }
    const grant = await db.oAuthGrant.findUnique({
      where: { id: check.grantId },
      select: { userId: true, clientId: true, hubIds: true, allHubs: true, scope: true, revokedAt: true, lastUsedAt: true, user: { select: { id: true, email: true, name: true } } },
    });
    if (!grant || grant.userId !== check.userId) throw new ApiError("unauthorized", "Invalid access token");
    if (grant.revokedAt) throw new ApiError("unauthorized", "Access token revoked: its grant was revoked");
    if (!grant.lastUsedAt || now.getTime() - grant.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
      await db.oAuthGrant.update({ where: { id: check.grantId }, data: { lastUsedAt: now } });
    }
    // A token narrowed at refresh holds the part of the grant's scope it names, never more than the grant's.
    const granted = grant.scope.split(" ");
    const scope = check.scope === undefined ? granted : granted.filter((s) => check.scope!.split(" ").includes(s));
    // The grant's consented hubs and read/write become the credential's own limits, enforced by lib/hubs/hub-access.ts.
    return {
      user: grant.user,
      credential: {
        type: "access_token",
        id: check.grantId,
        scopes: scope.includes("write") ? KEY_SCOPES : ["read"],
        hubIds: grant.allHubs ? null : grant.hubIds,
        oauth: { clientId: grant.clientId, resource: check.resource },
      },
    };
  }

  if (!token.startsWith(API_KEY_PREFIX)) throw new ApiError("unauthorized", "Invalid API key");
  const key = await db.apiKey.findUnique({
    where: { keyHash: hashSecret(token) },
    select: {
      id: true,
      revokedAt: true,
      expiresAt: true,
      lastUsedAt: true,
      scopes: true,
      hubScopeMode: true,
      hubIds: true,
      agentName: true,
      user: { select: { id: true, email: true, name: true } },
    },
  });
  if (!key) throw new ApiError("unauthorized", "Invalid API key");
  if (key.revokedAt) throw new ApiError("unauthorized", "API key has been revoked");
  if (key.expiresAt && key.expiresAt <= now) throw new ApiError("unauthorized", "API key has expired");
  if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
    await db.apiKey.update({ where: { id: key.id }, data: { lastUsedAt: now } });
  }
  return {
    user: key.user,
    credential: {
      type: "api_key",
      id: key.id,
      scopes: key.scopes.filter((scope): scope is KeyScope => (KEY_SCOPES as readonly string[]).includes(scope)),
      // An allowlist whose hubs are all gone reaches nothing; it never widens to every hub.
      hubIds: key.hubScopeMode === "hub_allowlist" ? key.hubIds : null,
      ...(key.agentName && { agentName: key.agentName }),
    },
  };
}

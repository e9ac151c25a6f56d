import { ApiError } from "@/lib/api/errors.ts";
import { KEY_SCOPES, type AuthUser, type Credential, type KeyScope } from "@/lib/api/context.ts";
import type { ChargedColumns, RateLimitResult, StatementCharge } from "@/lib/api/rate-limit.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Db, SqlRunner } from "@/lib/db/database.ts";
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
  /**
   * The request's rate-limit call, charged to an API key's user in the statement that reads the key
   * (a limiter kept in the database; issue 16). Nothing is charged for a key that is revoked,
   * expired or unknown. OAuth access tokens leave it to the caller (`charged` undefined).
   */
  charge?: StatementCharge;
}

/** Turns an `Authorization: Bearer …` header into the calling user, or throws unauthorized. */
export async function resolveCredential(
  { db, sql }: { db: Db; sql: SqlRunner },
  authorization: string | null,
  now: Date,
  options: ResolveOptions = {},
): Promise<{ user: AuthUser; credential: Credential; charged?: RateLimitResult }> {
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
    if (stale(grant.lastUsedAt, now)) {
      const { count } = await db.oAuthGrant.updateMany({ where: { id: check.grantId, revokedAt: null, ...staleWhere(now) }, data: { lastUsedAt: now } });
      if (count === 0) await refuseIfGone(db.oAuthGrant.findUnique({ where: { id: check.grantId }, select: { revokedAt: true } }), "Access token revoked: its grant was revoked");
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
  // Every API request starts here, so the key and its user come in one plain statement: through
  // Prisma's query engine the same read cost about 0.6 ms of the server's CPU against 0.1 ms
  // (measured on PostgreSQL, 2026-11-28), several times what the database spends on it. The same
  // statement charges the rate limit when the limiter is in the database: the user is known only
  // from this row, and a second round trip for it cost as much as the read.
  const source = `SELECT k.id, k.revoked_at, k.expires_at, k.last_used_at, k.scopes::text[] AS scopes, k.hub_scope_mode,
            k.hub_ids::text[] AS hub_ids, k.agent_name, u.id AS user_id, u.email, u.name,
            CASE WHEN k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $2::timestamptz) THEN u.id::text END AS identity
       FROM api_keys k JOIN users u ON u.id = k.user_id
      WHERE k.key_hash = $1`;
  const params = [hashSecret(token), now.toISOString()];
  const statement = options.charge ? options.charge.statement(source, params) : { text: source, params };
  const [row] = await sql.query<ApiKeyRow & ChargedColumns>(statement.text, statement.params);
  const charged = row && options.charge?.settle(row, sql);
  const key = row && {
    id: row.id,
    revokedAt: instant(row.revoked_at),
    expiresAt: instant(row.expires_at),
    lastUsedAt: instant(row.last_used_at),
    scopes: row.scopes,
    hubScopeMode: row.hub_scope_mode,
    hubIds: row.hub_ids,
    agentName: row.agent_name,
    user: { id: row.user_id, email: row.email, name: row.name },
  };
  if (!key) throw new ApiError("unauthorized", "Invalid API key");
  if (key.revokedAt) throw new ApiError("unauthorized", "API key has been revoked");
  if (key.expiresAt && key.expiresAt <= now) throw new ApiError("unauthorized", "API key has expired");
  if (stale(key.lastUsedAt, now)) {
    const { count } = await db.apiKey.updateMany({ where: { id: key.id, revokedAt: null, ...staleWhere(now) }, data: { lastUsedAt: now } });
    if (count === 0) await refuseIfGone(db.apiKey.findUnique({ where: { id: key.id }, select: { revokedAt: true } }), "API key has been revoked");
  }
  return {
    user: key.user,
    charged,
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

function stale(lastUsedAt: Date | null, now: Date): boolean {
  return !lastUsedAt || now.getTime() - lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS;
}

/**
 * The refresh is conditional on the value still being stale: requests that read the same stale value
 * at once write it once (the others, waiting for the first's row lock, then match nothing), and a key
 * or grant deleted meanwhile matches nothing instead of making Prisma's update throw "not found" (a 404).
 */
function staleWhere(now: Date) {
  return { OR: [{ lastUsedAt: null }, { lastUsedAt: { lte: new Date(now.getTime() - LAST_USED_RESOLUTION_MS) } }] };
}

/**
 * A refresh that matched nothing: another request refreshed it (fine), or the credential was deleted or
 * revoked since it was read, and the request, ordered after that by the row lock, is refused.
 */
async function refuseIfGone(read: Promise<{ revokedAt: Date | null } | null>, revokedMessage: string): Promise<void> {
  const row = await read;
  if (!row) throw new ApiError("unauthorized", "Invalid credential: it was deleted");
  if (row.revokedAt) throw new ApiError("unauthorized", revokedMessage);
}

interface ApiKeyRow {
  id: string;
  revoked_at: Date | string | null;
  expires_at: Date | string | null;
  last_used_at: Date | string | null;
  scopes: string[];
  hub_scope_mode: string;
  hub_ids: string[];
  agent_name: string | null;
  user_id: string;
  email: string;
  name: string;
}

/** A timestamp as either driver returns it (node-postgres: Date; PGlite: Date or text). */
function instant(value: Date | string | null): Date | null {
  return value === null ? null : new Date(value);
}

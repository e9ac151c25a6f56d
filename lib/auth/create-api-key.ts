import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { KEY_SCOPES } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { newId, uuidField } from "@/lib/ids.ts";
import { hashSecret } from "./hash-secret.ts";
import { sessionStillValid } from "./session.ts";
import { serializeApiKey, type ApiKeyObject } from "./serialize-api-key.ts";

export const API_KEY_PREFIX = "egk_";

/**
 * Taken by whatever issues a user's keys or OAuth grants and by whatever revokes several of them at
 * once (an agent's disconnect, an account claim): a key made by a credential those revoke either
 * exists before the revocation's statement, which then revokes it too, or waits and sees its
 * credential revoked (or its session cut off).
 */
export function apiKeysLockKey(userId: string): string {
  return `api-keys:${userId}`;
}

/** Active (not revoked) keys one user may hold; creating one more is a 409 conflict. */
export const MAX_API_KEYS_PER_USER = 100;
export const MAX_KEY_HUBS = 20;
export const TRUST_LEVELS = ["public", "standard", "elevated", "admin"] as const;

/**
 * Memax's finer grants, which its CLI sends (`memax setup --allow-delete`, `--allow-organize`,
 * `--agent-sync`; `memax auth create-key --grant …`). Engram keys have two scopes, and `write`
 * already covers each of these, so they are accepted next to `write` and kept in `permissions`.
 */
const WRITE_GRANTS = new Set(["organize", "delete", "agent-sync"]);
const ACCOUNT_GRANT = /^(agent-sync|(config|settings|account):[a-z0-9_.*-]+)$/;

function isWriteGrant(scope: string): boolean {
  return WRITE_GRANTS.has(scope) || ACCOUNT_GRANT.test(scope);
}

const scopeSchema = z
  .string()
  .trim()
  .refine((scope) => (KEY_SCOPES as readonly string[]).includes(scope) || isWriteGrant(scope), {
    message: 'scopes must be "read" and/or "write" (with "write": also organize, delete, agent-sync, config:…, settings:…, account:…)',
  });

export const createApiKeyBodySchema = z.object({
  name: z.string().trim().min(1).max(100),
  expires_in_days: z.int().min(1).max(3650).optional(),
  hub_id: uuidField("hub_id must be a hub id (not a slug)").optional(),
  hub_ids: z.array(uuidField("hub_ids must be hub ids (not slugs)")).max(MAX_KEY_HUBS, `at most ${MAX_KEY_HUBS} hub_ids`).optional(),
  // [] (what Memax's CLI sends without --grant) means the default: read and write.
  scopes: z.array(scopeSchema).max(20).optional(),
  agent_name: z.string().trim().min(1).max(100).optional(),
  permissions: z.array(z.string().trim().min(1).max(100)).max(50).optional(),
  trust_level: z.enum(TRUST_LEVELS).optional(),
});

export interface ApiKeyOptions {
  expiresInDays?: number;
  /** An expiry the key may not outlive (the key that created it). */
  expiresBy?: Date | null;
  scopes?: readonly string[];
  /** Restrict the key to these hubs (already checked to be the user's). */
  hubIds?: readonly string[];
  agentName?: string;
  permissions?: readonly string[];
  trustLevel?: string;
}

/**
 * Issues a key: returned once in full, stored only as its SHA-256. It can be limited to some of
 * the caller's hubs and to reading; lib/hubs/hub-access.ts enforces both on every request.
 */
export async function createApiKey(
  ctx: Pick<AuthContext, "db" | "user" | "now" | "credential">,
  input: z.output<typeof createApiKeyBodySchema>,
): Promise<ApiKeyObject & { key: string }> {
  const wanted = [...new Set([...(input.hub_id ? [input.hub_id] : []), ...(input.hub_ids ?? [])])];
  if (wanted.length > MAX_KEY_HUBS) throw new ApiError("invalid_request", `A key can be limited to at most ${MAX_KEY_HUBS} hubs`);
  const grants = (input.scopes ?? []).filter(isWriteGrant);
  if (grants.length && !input.scopes!.includes("write")) {
    throw new ApiError("invalid_request", `${grants.join(", ")}: on Engram these are part of "write"; add "write" to scopes, or leave them out`, {
      issues: [{ path: "scopes", message: "needs write" }],
    });
  }
  const accountGrants = grants.filter((grant) => ACCOUNT_GRANT.test(grant));
  if (wanted.length && accountGrants.length) {
    throw new ApiError("invalid_request", `${accountGrants.join(", ")}: account-level grants need a key for all your hubs, not one limited to some`, {
      issues: [{ path: "scopes", message: "account-level grant on a hub-limited key" }],
    });
  }
  // A key that creates a key passes on its own limits: the new one never outlives it, and a key
  // issued for an agent only makes keys for that agent (so revoking the agent's keys, or letting
  // them expire, ends everything they made).
  const parent =
    ctx.credential.type === "api_key" && ctx.credential.id
      ? await ctx.db.apiKey.findUnique({ where: { id: ctx.credential.id }, select: { expiresAt: true, agentName: true } })
      : null;
  if (parent?.agentName && input.agent_name !== undefined && input.agent_name !== parent.agentName) {
    throw new ApiError("forbidden", `This key was issued for the agent "${parent.agentName}"; it can only create keys for that agent`);
  }
  const agentName = input.agent_name ?? parent?.agentName ?? undefined;
  const mine = new Map((await readableHubs(ctx)).map((m) => [m.hub.id, m.hub.slug]));
  const unknown = wanted.find((id) => !mine.has(id));
  if (unknown) throw new ApiError("not_found", `Hub not found: ${unknown}`);

  const { key, row } = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, apiKeysLockKey(ctx.user.id));
    // Checked when the request began, but revoked since maybe (a revoked key must not leave a new one behind).
    await assertCredentialLive(tx, ctx.user.id, ctx.credential, ctx.now());
    const active = await tx.apiKey.count({ where: { userId: ctx.user.id, revokedAt: null } });
    if (active >= MAX_API_KEYS_PER_USER) {
      throw new ApiError("conflict", `You have ${active} API keys; the limit is ${MAX_API_KEYS_PER_USER}. Revoke one first.`, {
        limit: MAX_API_KEYS_PER_USER,
      });
    }
    return insertApiKey(tx, ctx.user.id, input.name, ctx.now(), {
      expiresInDays: input.expires_in_days,
      expiresBy: parent?.expiresAt ?? null,
      scopes: input.scopes?.length ? input.scopes : undefined,
      hubIds: wanted,
      agentName,
      permissions: [...(input.permissions ?? []), ...grants],
      trustLevel: input.trust_level,
    });
  });
  return { ...serializeApiKey(row, mine), key };
}

/**
 * The credential behind this request, read again under a row lock: a revocation of that one row
 * waits for the new key to commit (and a revocation committed first is seen). Revoked or expired
 * by now → 401, as its next request would get.
 */
async function assertCredentialLive(tx: DbClient, userId: string, credential: AuthContext["credential"], now: Date): Promise<void> {
  if (credential.type === "session") {
    // A session has no row to lock: a claim (lib/auth/claim-account.ts) sets the account's cut-off
    // before it takes this lock, so a cut-off read here, under the lock, is either committed (seen,
    // 401) or not yet (the claim then waits for this key and revokes it). A plain read: locking the
    // user row would wait on the claim while the claim waits on this lock.
    if (credential.session && !(await sessionStillValid(tx, userId, credential.session))) {
      throw new ApiError("unauthorized", "Your session has expired or is invalid; sign in again");
    }
    return;
  }
  if (!credential.id) return;
  if (credential.type === "api_key") {
    const [row] = await tx.$queryRaw<{ revoked_at: Date | null; expires_at: Date | null }[]>`
      SELECT revoked_at, expires_at FROM api_keys WHERE id = ${credential.id}::uuid FOR SHARE`;
    if (!row || row.revoked_at) throw new ApiError("unauthorized", "API key has been revoked");
    if (row.expires_at && row.expires_at <= now) throw new ApiError("unauthorized", "API key has expired");
  } else if (credential.type === "access_token") {
    const [row] = await tx.$queryRaw<{ revoked_at: Date | null }[]>`SELECT revoked_at FROM oauth_grants WHERE id = ${credential.id}::uuid FOR SHARE`;
    if (!row || row.revoked_at) throw new ApiError("unauthorized", "Access token revoked: its grant was revoked");
  }
}

export async function insertApiKey(db: DbClient, userId: string, name: string, now: Date, options: ApiKeyOptions | number = {}) {
  const opts: ApiKeyOptions = typeof options === "number" ? { expiresInDays: options } : options;
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const hubIds = [...new Set(opts.hubIds ?? [])];
  const row = await db.apiKey.create({
    data: {
      id: newId(now.getTime()),
      userId,
      name,
      prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      keyHash: hashSecret(key),
      createdAt: now,
      expiresAt: keyExpiry(now, opts),
      scopes: opts.scopes ? KEY_SCOPES.filter((scope) => opts.scopes!.includes(scope)) : [...KEY_SCOPES],
      hubScopeMode: hubIds.length ? "hub_allowlist" : "all_accessible",
      hubIds,
      agentName: opts.agentName ?? null,
      permissions: [...new Set(opts.permissions ?? [])],
      trustLevel: opts.trustLevel ?? null,
    },
  });
  return { key, row };
}

/** The requested lifetime, cut at the expiry the key may not outlive. */
function keyExpiry(now: Date, opts: ApiKeyOptions): Date | null {
  const requested = opts.expiresInDays ? new Date(now.getTime() + opts.expiresInDays * 86_400_000) : null;
  if (!opts.expiresBy) return requested;
  return requested && requested < opts.expiresBy ? requested : opts.expiresBy;
}

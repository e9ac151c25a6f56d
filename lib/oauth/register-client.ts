import { randomBytes } from "node:crypto";
import { positiveIntEnv } from "@/lib/config.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { OAuthError } from "./oauth-error.ts";
import { MAX_REDIRECT_URIS, assertRedirectUri, hasSpaceOrControl } from "./redirect-uri.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";

/**
 * Clients added in the last hour that no one has consented to yet, across all callers:
 * ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR, default 1000 (of each kind). Registration needs no account,
 * so the per-address rate limit alone would let one caller add rows without end; with this and the
 * daily prune (prune-unused-clients.ts) never-used clients stay bounded. It is the backstop: the
 * per-address cap below is what one caller meets, so one caller cannot use up everyone's room.
 */
export function maxUnusedRegistrationsPerHour(): number {
  return positiveIntEnv("ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR", 1000);
}

/** The same, per address (both kinds together): ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR, default 20. */
export function maxUnusedRegistrationsPerAddress(): number {
  return positiveIntEnv("ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR", 20);
}

/** Kinds of client anyone can add without an account, each held to the hourly cap on its own. */
export type OpenClientKind = "registered" | "metadata_document";

/**
 * Refuses a new client of `kind` once the cap of never-used ones from the last hour is reached.
 * Run inside a transaction holding the "oauth-register" lock, so concurrent adds cannot all pass.
 */
export async function assertRoomForNewClient(tx: DbClient, kind: OpenClientKind, now: Date, origin?: string): Promise<void> {
  const since = new Date(now.getTime() - WINDOW_MS);
  if (origin) {
    const where = { createdFrom: origin, createdAt: { gte: since }, grants: { none: {} } };
    const mine = await tx.oAuthClient.count({ where });
    const cap = maxUnusedRegistrationsPerAddress();
    if (mine >= cap) {
      const message = "Too many clients were added from your address in the last hour without being used; try again later";
      throw new OAuthError("temporarily_unavailable", message, 429, await retryAfter(tx, where, mine - cap, now));
    }
  }
  const where = { kind, createdAt: { gte: since }, grants: { none: {} } };
  const recent = await tx.oAuthClient.count({ where });
  const cap = maxUnusedRegistrationsPerHour();
  if (recent >= cap) {
    const what = kind === "registered" ? "clients were registered" : "client ID metadata documents were first read";
    throw new OAuthError("temporarily_unavailable", `Too many ${what} in the last hour without being used; try again later`, 429, await retryAfter(tx, where, recent - cap, now));
  }
}

const WINDOW_MS = 60 * 60_000;

/**
 * Every 429 carries Retry-After (the spec's rule for an exhausted limit): room comes back when enough
 * of the counted clients leave the hour, the `over`-th oldest of them (0-based) being the last that must.
 */
async function retryAfter(tx: DbClient, where: Prisma.OAuthClientWhereInput, over: number, now: Date): Promise<Record<string, string>> {
  const freeing = await tx.oAuthClient.findFirst({ where, orderBy: { createdAt: "asc" }, skip: over, select: { createdAt: true } });
  const ms = freeing ? freeing.createdAt.getTime() + WINDOW_MS - now.getTime() : WINDOW_MS;
  return { "Retry-After": String(retryAfterSeconds(ms)) };
}

/** Control characters become spaces (the name is shown on the consent page; a NUL cannot even be stored). */
export function cleanClientName(raw: unknown, fallback: string): string {
  const clean = typeof raw === "string" ? raw.replace(/\p{Cc}/gu, " ").trim() : "";
  return clean ? clean.slice(0, 200) : fallback;
}

/** An http(s) client_uri without spaces or control characters, or nothing. */
export function cleanClientUri(raw: unknown): string | null {
  return typeof raw === "string" && /^https?:\/\//.test(raw) && !hasSpaceOrControl(raw) ? raw.slice(0, 2000) : null;
}

/**
 * RFC 7591 dynamic client registration for public clients (PKCE, no client secret). `origin` is the
 * caller's address as lib/api/client-address.ts gives it (an IPv6 one as its /64), for the per-address cap.
 */
export async function registerClient(db: Db, body: unknown, now: Date, origin?: string) {
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new OAuthError("invalid_client_metadata", "The body must be a JSON object of client metadata");
  const meta = body as Record<string, unknown>;
  const uris = meta.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS) {
    throw new OAuthError("invalid_redirect_uri", `redirect_uris must list 1 to ${MAX_REDIRECT_URIS} URIs`);
  }
  const redirectUris = [...new Set(uris.map(assertRedirectUri))];
  const grantTypes = meta.grant_types ?? ["authorization_code", "refresh_token"];
  if (!Array.isArray(grantTypes) || grantTypes.some((g) => g !== "authorization_code" && g !== "refresh_token")) {
    throw new OAuthError("invalid_client_metadata", "grant_types may only be authorization_code and refresh_token");
  }
  const responseTypes = meta.response_types ?? ["code"];
  if (!Array.isArray(responseTypes) || responseTypes.some((r) => r !== "code")) throw new OAuthError("invalid_client_metadata", 'response_types may only be ["code"]');
  const name = cleanClientName(meta.client_name, "Unnamed MCP client");
  const clientUri = cleanClientUri(meta.client_uri);
  const id = `ec_${randomBytes(18).toString("base64url")}`;
  await db.$transaction(async (tx) => {
    // One registration at a time, so concurrent ones cannot all pass the count below.
    await lockForTransaction(tx, "oauth-register");
    await assertRoomForNewClient(tx, "registered", now, origin);
    await tx.oAuthClient.create({ data: { id, name, redirectUris, kind: "registered", clientUri, createdAt: now, createdFrom: origin ?? null } });
  });
  // Confidential auth methods are answered with "none": this server issues no client secrets (RFC 7591 §3.2.1 lets it choose).
  return {
    client_id: id,
    client_id_issued_at: Math.floor(now.getTime() / 1000),
    client_name: name,
    redirect_uris: redirectUris,
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    ...(clientUri && { client_uri: clientUri }),
  };
}

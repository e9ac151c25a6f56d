import type { z } from "zod";
import type { ApiKey } from "@/lib/db/generated/client.ts";
import type { apiKeyObjectSchema } from "./api-key-object.ts";

export type HubScopeMode = "all_accessible" | "hub_allowlist";

/** A key as the API shows it (never the secret): lib/auth/api-key-object.ts. */
export type ApiKeyObject = z.output<typeof apiKeyObjectSchema>;

/** `slugs` maps hub id → slug for the key's allowlist (a hub deleted since is left out). */
export function serializeApiKey(row: ApiKey, slugs: ReadonlyMap<string, string> = new Map()): ApiKeyObject {
  const restricted = row.hubScopeMode === "hub_allowlist";
  const lastUsed = row.lastUsedAt?.toISOString() ?? null;
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scope: restricted ? row.hubIds.map((id) => slugs.get(id)).filter(Boolean).join(",") : "all",
    scopes: row.scopes,
    hub_id: restricted ? (row.hubIds[0] ?? null) : null,
    hub_ids: restricted ? row.hubIds : [],
    hub_scope_mode: restricted ? "hub_allowlist" : "all_accessible",
    agent_name: row.agentName ?? "",
    standalone: row.standalone,
    permissions: row.permissions,
    default_permissions: row.permissions,
    trust_level: row.trustLevel,
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt?.toISOString() ?? null,
    last_used: lastUsed,
    last_used_at: lastUsed,
    revoked_at: row.revokedAt?.toISOString() ?? null,
  };
}

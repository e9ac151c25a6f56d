import type { AuthContext, HubContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { Permission } from "@/lib/api/permissions.ts";
import { credentialReaches, credentialWrites, membershipWhere, readableHubs, targetHubOrThrow } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

/*
 * MCP's view of hub access is the one resolver's (lib/hubs/hub-access.ts): an API key's
 * allowlist and scopes and an OAuth grant's consented hubs and read/write are both the
 * credential's `hubIds` and `scopes`. These helpers only shape its answers for tools.
 */

/** The hub ids a call may touch when the credential is narrowed, or undefined when it is not. */
export async function narrowedHubIds(ctx: AuthContext): Promise<string[] | undefined> {
  if (ctx.credential.hubIds === null) return undefined;
  return (await readableHubs(ctx)).map((m) => m.hub.id);
}

export function assertReachable(ctx: AuthContext, hubId: string, what = "Hub"): void {
  if (!credentialReaches(ctx.credential, hubId)) throw new ApiError("not_found", `${what} not found`);
}

export function assertWriteScope(ctx: AuthContext): void {
  if (!credentialWrites(ctx.credential)) {
    throw new ApiError("forbidden", "This connection has read-only access; reconnect (or use a key) with write access to change memories");
  }
}

/**
 * `hub_id` as tools take it: a hub id, a hub slug, or "personal"; resolved to a hub the caller belongs to and the credential reaches.
 * `hubsTool`: the name the endpoint lists hubs under, which the refusal points to.
 */
export async function hubIdFromRef(ctx: AuthContext, ref: string | undefined, hubsTool = "engram_hubs"): Promise<string | undefined> {
  const value = ref?.trim();
  if (!value) return undefined;
  const hub = value.toLowerCase() === "personal" ? { hubType: "personal", ownerId: ctx.user.id } : isUuid(value) ? { id: value } : { slug: value.toLowerCase() };
  const membership = await ctx.db.hubMember.findFirst({ where: { ...membershipWhere(ctx), hub }, select: { hubId: true } });
  // The caller knows what they asked for; the message never repeats it (nothing to confirm or deny).
  if (!membership) throw new ApiError("not_found", `Hub not found: ${hubsTool} lists the hubs this connection can use`);
  return membership.hubId;
}

/** The hub a write goes to (given, or the personal hub) with `permission` required there — withAuth's own resolver. */
export async function hubForWrite(ctx: AuthContext, ref: string | undefined, permission: Permission, hubsTool?: string): Promise<HubContext> {
  assertWriteScope(ctx);
  const { hub, role } = await targetHubOrThrow(ctx, await hubIdFromRef(ctx, ref, hubsTool), permission);
  return { ...ctx, hub, role };
}

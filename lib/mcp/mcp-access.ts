import type { AuthContext, HubContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { Permission } from "@/lib/api/permissions.ts";
import { resolveHub } from "@/lib/api/with-auth.ts";
import { readableHubs, type Membership } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

/**
 * What an MCP caller may reach: the hubs of its memberships, narrowed by its credential's
 * access (an OAuth grant's consented hubs; API-key restrictions when they fill the same field).
 */
export async function reachableHubs(ctx: AuthContext): Promise<Membership[]> {
  const all = await readableHubs(ctx);
  const allowed = ctx.credential.access?.hubIds;
  return allowed ? all.filter((m) => allowed.includes(m.hub.id)) : all;
}

/** The hub ids a call may touch when the credential is narrowed, or undefined when it is not. */
export async function narrowedHubIds(ctx: AuthContext): Promise<string[] | undefined> {
  if (!ctx.credential.access?.hubIds) return undefined;
  return (await reachableHubs(ctx)).map((m) => m.hub.id);
}

export function assertReachable(ctx: AuthContext, hubId: string, what = "Hub"): void {
  const allowed = ctx.credential.access?.hubIds;
  if (allowed && !allowed.includes(hubId)) throw new ApiError("not_found", `${what} not found`);
}

export function assertWriteScope(ctx: AuthContext): void {
  if (ctx.credential.access && !ctx.credential.access.write) {
    throw new ApiError("forbidden", "This connection was granted read-only access; reconnect and allow write access to change memories");
  }
}

/** `hub_id` as tools take it: a hub id, a hub slug, or "personal"; resolved to a hub the caller belongs to and the credential reaches. */
export async function hubIdFromRef(ctx: AuthContext, ref: string | undefined): Promise<string | undefined> {
  const value = ref?.trim();
  if (!value) return undefined;
  const hub =
    value.toLowerCase() === "personal" ? { hubType: "personal", ownerId: ctx.user.id } : isUuid(value) ? { id: value } : { slug: value };
  const membership = await ctx.db.hubMember.findFirst({ where: { userId: ctx.user.id, hub }, select: { hubId: true } });
  // The caller knows what they asked for; the message never repeats it (nothing to confirm or deny).
  if (!membership) throw new ApiError("not_found", "Hub not found: engram_hubs lists the hubs this connection can use");
  assertReachable(ctx, membership.hubId);
  return membership.hubId;
}

/** The hub a write goes to (given, or the personal hub) with `permission` required there — withAuth's own resolver. */
export async function hubForWrite(ctx: AuthContext, ref: string | undefined, permission: Permission): Promise<HubContext> {
  assertWriteScope(ctx);
  const hubCtx = await resolveHub(ctx, await hubIdFromRef(ctx, ref), permission);
  assertReachable(ctx, hubCtx.hub.id);
  return hubCtx;
}

import type { AuthContext, HubRecord } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can, isRole, type Permission, type Role } from "@/lib/api/permissions.ts";
import { isUuid } from "@/lib/ids.ts";

export interface Membership {
  hub: HubRecord;
  role: Role;
}

/** Every hub the caller belongs to, with their role: the read scope of lists and recall. */
export async function readableHubs(ctx: Pick<AuthContext, "db" | "user">): Promise<Membership[]> {
  const rows = await ctx.db.hubMember.findMany({ where: { userId: ctx.user.id }, include: { hub: true } });
  return rows.flatMap((row) => (isRole(row.role) ? [{ hub: row.hub, role: row.role }] : []));
}

/** The caller's membership of one hub; a hub they do not belong to is simply not found. */
export async function membershipOrThrow(ctx: Pick<AuthContext, "db" | "user">, hubId: string): Promise<Membership> {
  const row = isUuid(hubId)
    ? await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId, userId: ctx.user.id } }, include: { hub: true } })
    : null;
  if (!row || !isRole(row.role)) throw new ApiError("not_found", "Hub not found");
  return { hub: row.hub, role: row.role };
}

/**
 * The caller's membership of one hub, required to grant `permission` there:
 * not a member → not_found (never reveal the hub), member without the role → forbidden.
 * Read fresh on every request so role changes and removals apply immediately.
 */
export async function hubPermissionOrThrow(
  ctx: Pick<AuthContext, "db" | "user">,
  hubId: string,
  permission: Permission,
  action: string,
): Promise<Membership> {
  const membership = await membershipOrThrow(ctx, hubId);
  if (!can(membership.role, permission, membership.hub)) {
    throw new ApiError("forbidden", `Your role (${membership.role}) does not allow you to ${action} in hub "${membership.hub.name}"`);
  }
  return membership;
}

/** Personal hubs have exactly one member and cannot be shared, left, transferred or deleted. */
export function assertTeamHub(hub: HubRecord, action: string): void {
  if (hub.hubType === "personal") throw new ApiError("personal_hub", `A personal hub cannot be ${action}`);
}

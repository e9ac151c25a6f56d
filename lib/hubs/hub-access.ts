import type { AuthContext, HubRecord } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isRole, type Role } from "@/lib/api/permissions.ts";
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

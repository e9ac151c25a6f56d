import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { dropMembership } from "./drop-membership.ts";
import { assertActsForAccount, assertTeamHub, membershipOrThrow } from "./hub-access.ts";

/** Non-owners leave directly; the owner transfers first, or deletes the hub when alone. */
export async function leaveHub(ctx: AuthContext, hubId: string) {
  const { hub, role } = await membershipOrThrow(ctx, hubId);
  assertTeamHub(hub, "left");
  assertActsForAccount(ctx.credential, "leave a hub");
  if (role === "owner") {
    const members = await ctx.db.hubMember.count({ where: { hubId: hub.id } });
    if (members > 1) {
      throw new ApiError("ownership_transfer_required", "Transfer ownership to another member before leaving", { member_count: members });
    }
    throw new ApiError("last_member_delete_required", "You are the last member; delete the hub instead of leaving it");
  }
  if (!(await dropMembership(ctx.db, hub.id, ctx.user.id, ctx.now()))) {
    throw new ApiError("conflict", "Your membership changed meanwhile (you may have just become the owner); reload and try again");
  }
  return { hub_id: hub.id, left: true as const, status: "left" as const };
}

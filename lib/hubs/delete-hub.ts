import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { assertTeamHub, hubPermissionOrThrow } from "./hub-access.ts";

/**
 * Owner only. Removes the hub with its memories, chunks, topics, invites,
 * attachments, transfers and memberships in one statement, so one transaction
 * (every child table cascades from hubs); the owner check is repeated in the delete itself so a concurrent
 * ownership transfer cannot let the previous owner through.
 */
export async function deleteHub(ctx: AuthContext, hubId: string) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.own", "delete the hub");
  assertTeamHub(hub, "deleted");
  const { count } = await ctx.db.hub.deleteMany({ where: { id: hub.id, ownerId: ctx.user.id, hubType: "team" } });
  if (count === 0) throw new ApiError("forbidden", "Only the hub owner can delete the hub");
  return { id: hub.id, hub_id: hub.id, deleted: true as const };
}

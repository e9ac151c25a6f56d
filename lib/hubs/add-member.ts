import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can } from "@/lib/api/permissions.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { assertTeamHub, hubPermissionOrThrow } from "./hub-access.ts";
import type { AddMemberBody } from "./hub-fields.ts";
import { serializeMember } from "./serialize-hub.ts";
import { onMemberJoined } from "@/lib/notifications/notify.ts";

/** Adds an existing user directly; admins add contributors and viewers, only the owner adds admins. */
export async function addMember(ctx: AuthContext, hubId: string, input: AddMemberBody) {
  const { hub, role } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "add members");
  assertTeamHub(hub, "shared");
  if (input.role === "admin" && !can(role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can add admins");
  const user = await ctx.db.user.findUnique({ where: { id: input.user_id }, select: { id: true } });
  if (!user) throw new ApiError("not_found", "User not found");
  try {
    const member = await ctx.db.$transaction(async (tx) => {
      const created = await tx.hubMember.create({
        data: { hubId: hub.id, userId: user.id, role: input.role, joinedAt: ctx.now() },
        include: { user: { select: { name: true, email: true } } },
      });
      await onMemberJoined(tx, { hub, userId: user.id, role: input.role, actorId: ctx.user.id, now: ctx.now() });
      return created;
    });
    return serializeMember(member);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("already_member", "This user is already a member of the hub");
    throw error;
  }
}

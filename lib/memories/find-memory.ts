import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isRole, type Role } from "@/lib/api/permissions.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { Hub, Memory } from "@/lib/db/generated/client.ts";
import { effectiveRole, memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

/**
 * A memory in a hub the caller may reach (lib/hubs/hub-access.ts), with the role they act with
 * there. The access rule is part of the query: a memory elsewhere is not found.
 */
export async function findMemoryOrThrow(ctx: Pick<AuthContext, "user" | "credential"> & { db: DbClient }, id: string): Promise<{ memory: Memory & { hub: Hub }; role: Role }> {
  const memory = isUuid(id)
    ? await ctx.db.memory.findFirst({
        where: { id, ...memoryAccessWhere(ctx) },
        include: { hub: { include: { members: { where: { userId: ctx.user.id }, select: { role: true } } } } },
      })
    : null;
  const role = memory?.hub.members[0]?.role;
  if (!memory || !role || !isRole(role)) throw new ApiError("not_found", "Memory not found");
  const { members: _members, ...hub } = memory.hub;
  return { memory: { ...memory, hub }, role: effectiveRole(ctx.credential, role) };
}

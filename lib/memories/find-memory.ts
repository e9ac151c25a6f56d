import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isRole, type Role } from "@/lib/api/permissions.ts";
import type { Hub, Memory } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";

/**
 * A memory in a hub the caller belongs to, with their role there. The
 * membership is part of the query: a memory elsewhere is not found.
 */
export async function findMemoryOrThrow(ctx: Pick<AuthContext, "db" | "user">, id: string): Promise<{ memory: Memory & { hub: Hub }; role: Role }> {
  const memory = isUuid(id)
    ? await ctx.db.memory.findFirst({
        where: { id, hub: { members: { some: { userId: ctx.user.id } } } },
        include: { hub: { include: { members: { where: { userId: ctx.user.id }, select: { role: true } } } } },
      })
    : null;
  const role = memory?.hub.members[0]?.role;
  if (!memory || !role || !isRole(role)) throw new ApiError("not_found", "Memory not found");
  const { members: _members, ...hub } = memory.hub;
  return { memory: { ...memory, hub }, role };
}

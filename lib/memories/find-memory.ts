import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isRole, type Role } from "@/lib/api/permissions.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { Hub, Memory } from "@/lib/db/generated/client.ts";
import { effectiveRole, memoryAccessWhere } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

type Caller = Pick<AuthContext, "user" | "credential"> & { db: DbClient };
type Found<M> = { memory: M & { hub: Hub }; role: Role };

/**
 * A memory in a hub the caller may reach (lib/hubs/hub-access.ts), with the role they act with
 * there. The access rule is part of the query: a memory elsewhere is not found. `content: false`
 * leaves out its text (up to 3 MiB) for callers that only check or act on the row.
 */
export async function findMemoryOrThrow(ctx: Caller, id: string): Promise<Found<Memory>>;
export async function findMemoryOrThrow(ctx: Caller, id: string, options: { content: false }): Promise<Found<Omit<Memory, "content">>>;
export async function findMemoryOrThrow(ctx: Caller, id: string, options?: { content: false }): Promise<Found<Omit<Memory, "content">>> {
  const memory = isUuid(id)
    ? await ctx.db.memory.findFirst({
        where: { id, ...memoryAccessWhere(ctx) },
        include: { hub: { include: { members: { where: { userId: ctx.user.id }, select: { role: true } } } } },
        omit: { content: options?.content === false },
      })
    : null;
  const role = memory?.hub.members[0]?.role;
  if (!memory || !role || !isRole(role)) throw new ApiError("not_found", "Memory not found");
  const { members: _members, ...hub } = memory.hub;
  return { memory: { ...memory, hub }, role: effectiveRole(ctx.credential, role) };
}

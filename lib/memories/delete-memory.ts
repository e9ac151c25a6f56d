import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import { memoryWriteGuard } from "./memory-write-guard.ts";

/** Hard delete of the memory with its chunks and attachments (cascade). */
export async function deleteMemory(ctx: AuthContext, id: string): Promise<{ id: string; deleted: true }> {
  for (;;) {
    const { memory, role } = await findMemoryOrThrow(ctx, id);
    if (!canDeleteMemory(role, memory.ownerId === ctx.user.id, memory.hub)) {
      throw new ApiError("forbidden", `Your role (${role}) does not allow deleting this memory`);
    }
    // One conditional statement: the permission is checked again by the DELETE itself.
    const { count } = await ctx.db.memory.deleteMany({ where: { id: memory.id, hubId: memory.hubId, ...memoryWriteGuard(ctx.user.id, "delete") } });
    if (count === 1) return { id: memory.id, deleted: true };
    // Something changed in between (role, policy, hub): look again and answer for the new state.
  }
}

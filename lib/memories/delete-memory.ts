import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import { eventsStatement } from "@/lib/events/emit-event.ts";

/** Hard delete of the memory with its chunks and attachments (cascade). */
export async function deleteMemory(ctx: AuthContext, id: string): Promise<{ id: string; deleted: true }> {
  const { memory, role } = await findMemoryOrThrow(ctx, id);
  if (!canDeleteMemory(role, memory.ownerId === ctx.user.id, memory.hub)) {
    throw new ApiError("forbidden", `Your role (${role}) does not allow deleting this memory`);
  }
  await ctx.db.$transaction([
    ctx.db.memory.delete({ where: { id: memory.id } }),
    eventsStatement(ctx.db, { type: "memory.deleted", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id }),
  ]);
  return { id: memory.id, deleted: true };
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { findMemoryOrThrow } from "./find-memory.ts";

/** Hard delete of the memory with its chunks and attachments (cascade), then the attachments' files. */
export async function deleteMemory(ctx: AuthContext, id: string): Promise<{ id: string; deleted: true }> {
  const { memory, role } = await findMemoryOrThrow(ctx, id);
  if (!canDeleteMemory(role, memory.ownerId === ctx.user.id, memory.hub)) {
    throw new ApiError("forbidden", `Your role (${role}) does not allow deleting this memory`);
  }
  const keys = await ctx.db.$transaction(async (tx) => {
    const detached = await detachUploads(tx, { memoryId: { in: [memory.id] } });
    await tx.memory.delete({ where: { id: memory.id } });
    return detached;
  });
  await removeBlobs(ctx.db, keys);
  return { id: memory.id, deleted: true };
}

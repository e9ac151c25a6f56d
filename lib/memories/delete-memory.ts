import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import { memoryWriteGuard } from "./memory-write-guard.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { dropMemoryCopies } from "./drop-memory-copies.ts";

const CHANGED = Symbol("changed");
// As update-memory.ts: a delete that keeps matching nothing (the SQL guard refusing what
// canDeleteMemory allowed, or the row changing on every attempt) retried for good, holding the request.
const ATTEMPTS = 5;

/** Hard delete of the memory with its chunks and attachments (cascade) and what other rows copied of it, then the attachments' files. */
export async function deleteMemory(ctx: AuthContext, id: string): Promise<{ id: string; deleted: true }> {
  for (let attempt = 1; ; attempt++) {
    const { memory, role } = await findMemoryOrThrow(ctx, id, { content: false });
    if (!canDeleteMemory(role, memory.ownerId === ctx.user.id, memory.hub)) {
      throw new ApiError("forbidden", `Your role (${role}) does not allow deleting this memory`);
    }
    // One conditional statement: the permission is checked again by the DELETE itself; the
    // attachments' uploads are detached in the same transaction and their files go after the commit.
    const done = await ctx.db
      .$transaction(async (tx) => {
        // The memory's row first, as a re-push replacing its file takes it: read before that lock, the
        // attachments were the ones a replace under way was swapping out, and the cascade then took the
        // new file's attachment with its upload left attached to nothing (never swept, its bytes kept).
        await lockMemoryRows(tx, [memory.id], [memory.hubId]);
        const detached = await detachUploads(tx, { memoryId: { in: [memory.id] } });
        const { count } = await tx.memory.deleteMany({ where: { id: memory.id, hubId: memory.hubId, ...memoryWriteGuard(ctx.user.id, "delete") } });
        if (count !== 1) throw CHANGED;
        const boards = await dropMemoryCopies(tx, [memory.id], ctx.now());
        await emitEvent(tx, { type: "memory.deleted", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id });
        return { detached, boards };
      })
      .catch((error: unknown) => {
        if (error === CHANGED) return null;
        throw error;
      });
    if (done) {
      await removeBlobs(ctx.db, done.detached);
      for (const board of done.boards) kickCustomBoard(board);
      return { id: memory.id, deleted: true };
    }
    // Something changed in between (role, policy, hub): look again and answer for the new state.
    if (attempt >= ATTEMPTS) throw new ApiError("conflict", "The memory kept changing while it was being deleted; try again");
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { detachObjects, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { memoryWriteGuard } from "./memory-write-guard.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { dropMemoryCopies } from "./drop-memory-copies.ts";

export interface Skipped {
  id: string;
  reason: "not_found" | "not_owned" | "conflict";
}

/** Deletes every listed memory the caller may delete, in one transaction; reports the rest. */
export async function batchDeleteMemories(ctx: AuthContext, input: { ids: string[] }) {
  const ids = [...new Set(input.ids)];
  const memberships = new Map((await readableHubs(ctx)).map((m) => [m.hub.id, m]));
  const hubIds = [...memberships.keys()];
  const { keys, boards, ...result } = await ctx.db.$transaction(async (tx) => {
    // Locked in id order first (lib/db/row-lock.ts): a concurrent move cannot take one elsewhere now.
    const locked = await lockMemoryRows(tx, ids.filter(isUuid), hubIds);
    const found = await tx.memory.findMany({ where: { id: { in: locked }, hubId: { in: hubIds } }, select: { id: true, hubId: true, ownerId: true } });
    const byId = new Map(found.map((m) => [m.id, m]));
    const skipped: Skipped[] = [];
    const deletable: string[] = [];
    for (const id of ids) {
      const memory = byId.get(id);
      const membership = memory && memberships.get(memory.hubId);
      if (!memory || !membership) skipped.push({ id, reason: "not_found" });
      else if (!canDeleteMemory(membership.role, memory.ownerId === ctx.user.id, membership.hub)) skipped.push({ id, reason: "not_owned" });
      else deletable.push(id);
    }
    if (deletable.length === 0) return { deleted: 0, skipped, keys: [], boards: [] };
    const attachments = await tx.attachment.findMany({ where: { memoryId: { in: deletable } }, select: { memoryId: true, objectKey: true } });
    // The roles were read before the transaction: the delete checks them again itself, as a single
    // delete does, so a role or delete policy changed meanwhile leaves the memory where it is.
    await tx.memory.deleteMany({ where: { id: { in: deletable }, hubId: { in: hubIds }, ...memoryWriteGuard(ctx.user.id, "delete") } });
    const kept = new Set((await tx.memory.findMany({ where: { id: { in: deletable } }, select: { id: true } })).map((m) => m.id));
    const deleted = deletable.filter((id) => !kept.has(id));
    for (const id of deletable) if (kept.has(id)) skipped.push({ id, reason: "not_owned" });
    const keys = attachments.filter((a) => !kept.has(a.memoryId)).map((a) => a.objectKey);
    await detachObjects(tx, keys);
    const boards = await dropMemoryCopies(tx, deleted, ctx.now());
    await emitEvent(tx, deleted.map((id) => ({ type: "memory.deleted" as const, hubId: byId.get(id)!.hubId, actorId: ctx.user.id, entityId: id })));
    return { deleted: deleted.length, skipped, keys, boards };
  });
  await removeBlobs(ctx.db, keys);
  for (const board of boards) kickCustomBoard(board);
  return result;
}

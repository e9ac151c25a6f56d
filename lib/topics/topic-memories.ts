import { z } from "zod";
import type { AuthContext, HubRecord } from "@/lib/api/context.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { hubMembersLockKey, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { canEditMemory } from "@/lib/api/permissions.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { isUuid } from "@/lib/ids.ts";
import { serializeMemory } from "@/lib/memories/serialize-memory.ts";
import { assertNotArchived, lockTopicForFiling, readableTopicOrThrow } from "./topic-or-throw.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/** Memories filed under exactly this topic (not its subtopics), newest first, keyset-paginated. */
export async function listTopicMemories(ctx: AuthContext, topicId: string, query: { limit?: string; cursor?: string }) {
  const { topic } = await readableTopicOrThrow(ctx, topicId);
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  // The topic is part of the list name, so a cursor of one topic's list is refused on another's.
  const list = `topic-memories:${topic.id}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.memory.findMany({
    where: {
      hubId: topic.hubId,
      topicId: topic.id,
      // Its delete beginning since the check above: as a topic being deleted, it holds nothing anyone sees
      // (GET /v1/memories?topic_id= alike), rather than memories showing the id of a topic that is 404.
      topic: { deletingAt: null },
      ...(after && { OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
    omit: { content: true },
  });
  const result = page("memories", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return { ...result, memories: result.memories.map(serializeMemory) };
}

/** A memory of the topic's hub that the caller may edit (owners of it, or managers). */
async function editableMemoryOrThrow(ctx: AuthContext, hubId: string, memoryId: string, role: Parameters<typeof canEditMemory>[0]) {
  const memory = isUuid(memoryId) ? await ctx.db.memory.findFirst({ where: { id: memoryId, hubId }, select: { id: true, ownerId: true } }) : null;
  if (!memory) throw new ApiError("not_found", "Memory not found in this topic's hub");
  if (!canEditMemory(role, memory.ownerId === ctx.user.id)) {
    throw new ApiError("forbidden", `Your role (${role}) does not allow you to file this memory`);
  }
  return memory;
}

/**
 * Files a memory under the topic (POST /v1/topics/:id/memories, the Memax
 * SDK's assignMemory). The memory must be in the topic's hub and editable by
 * the caller; an archived topic takes no memories. Replaces any earlier topic
 * (a memory has one); `confidence` is accepted and recorded nowhere — Engram
 * has no automatic filer whose guesses it would gate.
 */
export async function assignTopicMemory(ctx: AuthContext, topicId: string, input: { memory_id: string }) {
  const { topic, membership } = await readableTopicOrThrow(ctx, topicId);
  assertNotArchived(topic);
  const memory = await editableMemoryOrThrow(ctx, topic.hubId, input.memory_id, membership.role);
  const filed = await fileMemory(ctx, membership.hub, memory, { id: memory.id, hubId: topic.hubId }, topic.id);
  if (filed === null) throw new ApiError("not_found", "Memory not found in this topic's hub");
  return { topic_id: topic.id, memory_id: memory.id, assigned: true as const, previous_topic_id: filed.previousTopicId };
}

/** Takes a memory out of the topic; a memory filed elsewhere (or nowhere) is left as it is. */
export async function unassignTopicMemory(ctx: AuthContext, topicId: string, memoryId: string) {
  const { topic, membership } = await readableTopicOrThrow(ctx, topicId);
  const memory = await editableMemoryOrThrow(ctx, topic.hubId, memoryId, membership.role);
  const filed = await fileMemory(ctx, membership.hub, memory, { id: memory.id, hubId: topic.hubId, topicId: topic.id }, null);
  return { topic_id: topic.id, memory_id: memory.id, unassigned: (filed?.count ?? 0) > 0 };
}

/**
 * Sets the topic of the memory `where` matches and, when that changed it, says so on the event stream:
 * one transaction. The memories changed (0 when it was already there) and the topic the memory had
 * under the lock, or null when none matched.
 */
function fileMemory(
  ctx: AuthContext,
  hub: HubRecord,
  memory: { ownerId: string },
  where: { id: string; hubId: string; topicId?: string },
  topicId: string | null,
): Promise<{ count: number; previousTopicId: string | null } | null> {
  return ctx.db.$transaction(async (tx) => {
    if (topicId) await lockTopicForFiling(tx, { id: topicId, hubId: where.hubId });
    else await lockForTransaction(tx, { shared: hubMembersLockKey(where.hubId) });
    // The role again, under the membership lock just taken: checked only before the transaction, a
    // demotion committed in between let a viewer file memories.
    const { role } = await lockMembershipOrThrow(tx, { ...ctx, db: tx }, hub, "memories.read", "file memories", { locked: true });
    if (!canEditMemory(role, memory.ownerId === ctx.user.id)) {
      throw new ApiError("forbidden", `Your role (${role}) does not allow you to file this memory`);
    }
    // The topic it had, read under the row's lock the update takes anyway: read before the
    // transaction, a re-filing committed meanwhile was what this one replaced, and went unnamed.
    const [locked] = await tx.$queryRaw<{ topic_id: string | null }[]>`
      SELECT topic_id::text AS topic_id FROM memories WHERE id = ${where.id}::uuid AND hub_id = ${where.hubId}::uuid FOR NO KEY UPDATE`;
    if (!locked) return null;
    // Filed where it already is, a memory changes not: its updated_at stays and no one is told (a
    // client re-sending a filing made every stream of the hub refetch, and every syncing client too).
    const elsewhere = topicId ? { OR: [{ topicId: null }, { topicId: { not: topicId } }] } : { topicId: { not: null } };
    const { count } = await tx.memory.updateMany({ where: { AND: [where, elsewhere] }, data: { topicId, updatedAt: ctx.now() } });
    if (count > 0) await emitEvent(tx, { type: "memory.updated", hubId: where.hubId, actorId: ctx.user.id, entityId: where.id });
    else if ((await tx.memory.count({ where: { ...where, topicId } })) === 0) return null;
    return { count, previousTopicId: locked.topic_id };
  });
}

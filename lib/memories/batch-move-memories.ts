import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canDeleteMemory, canEditMemory } from "@/lib/api/permissions.ts";
import { allows, forbiddenFor, hubMembersLockKey, lockMembershipOrThrow, readableHubs, type Membership } from "@/lib/hubs/hub-access.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import type { Topic } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import type { Skipped } from "./batch-delete-memories.ts";
import { contentHashLockKey, sourcePathLockKey } from "./create-memory.ts";
import { memoryWriteGuard } from "./memory-write-guard.ts";
import { assertHubQuotaAfterMove, assertOwnerQuotasAfterMove, ownerCounters } from "@/lib/quotas/assert-storage-quota.ts";
import { emitEvent, type EmitEventInput } from "@/lib/events/emit-event.ts";
import { lockTopicForFiling } from "@/lib/topics/topic-or-throw.ts";
import { lockUsageCounters, type UsageCounterKey } from "@/lib/quotas/lock-usage-counters.ts";
import { kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { dropMemoryCopies } from "./drop-memory-copies.ts";

/**
 * Why a memory was not moved (Memax's names): `already_at_target` (its hub and topic are already the
 * target's) and `source_delete_forbidden` (the caller may edit it but not delete it from its hub:
 * a move to another hub removes it from the source, so the source hub's contributor_delete_policy
 * applies) come in addition to the batch delete's reasons. Engram adds `conflict` (the target hub
 * already holds a memory with its source_path or its content, which a push there would have
 * returned instead of writing a second) and `owner_not_member` (someone else's memory would land in
 * a hub its owner is not a member of, and they would lose sight of their own memory).
 */
export interface MoveSkipped {
  id: string;
  reason: Skipped["reason"] | "already_at_target" | "source_delete_forbidden" | "owner_not_member";
}

/** A memory's content changed between the unlocked read of the hashes to lock and the row lock: again. */
const CONTENT_CHANGED = Symbol("content changed");
const ATTEMPTS = 3;

/**
 * Moves memories to another hub and/or topic. The target hub is `hub_id`, or
 * the topic's hub when only `topic_id` is given; a topic must belong to the
 * target hub. Chunks and attachments follow their memory. One transaction.
 */
export async function batchMoveMemories(ctx: AuthContext, input: { ids: string[]; hub_id?: string; topic_id?: string }) {
  const ids = [...new Set(input.ids)];
  const memberships = new Map((await readableHubs(ctx)).map((m) => [m.hub.id, m]));

  const topic = input.topic_id
    ? isUuid(input.topic_id)
      ? await ctx.db.topic.findFirst({ where: { id: input.topic_id, hubId: { in: [...memberships.keys()] }, deletingAt: null } })
      : null
    : undefined;
  if (topic === null) throw new ApiError("not_found", "Topic not found");
  // An archived topic is read-only until restored (docs/topics.md).
  if (topic?.archivedAt) throw new ApiError("topic_archived", "This topic is archived; restore it first", { topic_id: topic.id });
  const targetHubId = input.hub_id ?? topic!.hubId;
  const target = isUuid(targetHubId) ? memberships.get(targetHubId) : undefined;
  if (!target) throw new ApiError("not_found", "Hub not found");
  if (!allows(target, "memories.write")) throw forbiddenFor(target, "add memories");
  if (topic && topic.hubId !== target.hub.id) {
    throw new ApiError("invalid_request", "topic_id must belong to the target hub", { issues: [{ path: "topic_id", message: "belongs to another hub" }] });
  }

  for (let attempt = 1; ; attempt++) {
    try {
      const { boards, ...result } = await moveOnce(ctx, ids, memberships, target, topic);
      for (const board of boards) kickCustomBoard(board);
      return result;
    } catch (error) {
      if (error !== CONTENT_CHANGED) throw error;
      if (attempt >= ATTEMPTS) throw new ApiError("conflict", "These memories kept changing while they were moved; try again");
    }
  }
}

async function moveOnce(
  ctx: AuthContext,
  ids: string[],
  memberships: Map<string, Membership>,
  target: Membership,
  topic: Topic | undefined,
) {
  // Every source_path and content hash of the batch is locked in the target hub as a push there locks
  // it: a push or another move bringing the same path or content in meanwhile would otherwise break
  // the path's unique index (a 500) or leave two memories with one content where a push dedups. A
  // path never changes; a hash may (PATCH), so it is checked again under the row locks.
  const keys = await ctx.db.memory.findMany({
    where: { id: { in: ids.filter(isUuid) }, hubId: { in: [...memberships.keys()] } },
    select: { sourcePath: true, contentHash: true },
  });
  const pathLocks = [...new Set(keys.flatMap((m) => (m.sourcePath ? [sourcePathLockKey(target.hub.id, m.sourcePath)] : [])))].sort();
  const lockedHashes = new Set(keys.map((m) => m.contentHash));
  const hashLocks = [...lockedHashes].map((hash) => contentHashLockKey(target.hub.id, hash)).sort();

  return ctx.db.$transaction(async (tx) => {
    // The paths, then the hashes, then the membership, in one statement, as createMemory takes them (no deadlock).
    await lockForTransaction(tx, [...pathLocks, ...hashLocks, { shared: hubMembersLockKey(target.hub.id) }]);
    // The caller must still be able to write into the target when the moves commit.
    await lockMembershipOrThrow(tx, ctx, target.hub, "memories.write", "add memories", { locked: true });
    if (topic) await lockTopicForFiling(tx, topic);
    const locked = await lockMemoryRows(tx, ids.filter(isUuid), [...memberships.keys()]);
    const found = await tx.memory.findMany({
      where: { id: { in: locked }, hubId: { in: [...memberships.keys()] } },
      select: { id: true, hubId: true, ownerId: true, sourcePath: true, topicId: true, contentHash: true },
    });
    const byId = new Map(found.map((m) => [m.id, m]));
    const leaving = found.filter((m) => m.hubId !== target.hub.id);
    if (leaving.some((m) => !lockedHashes.has(m.contentHash))) throw CONTENT_CHANGED;
    const movingPaths = leaving.flatMap((m) => (m.sourcePath ? [m.sourcePath] : []));
    const movingHashes = [...new Set(leaving.map((m) => m.contentHash))];
    const inTarget = leaving.length
      ? await tx.memory.findMany({
          where: { hubId: target.hub.id, OR: [{ contentHash: { in: movingHashes } }, ...(movingPaths.length ? [{ sourcePath: { in: movingPaths } }] : [])] },
          select: { sourcePath: true, contentHash: true },
        })
      : [];
    // Read under the target's membership lock (shared): a removal from the target waits for this move.
    const ownersInTarget = leaving.length
      ? await tx.hubMember.findMany({ where: { hubId: target.hub.id, userId: { in: [...new Set(leaving.map((m) => m.ownerId))] } }, select: { userId: true } })
      : [];
    const takenPaths = new Set(inTarget.map((m) => m.sourcePath));
    const takenHashes = new Set(inTarget.map((m) => m.contentHash));
    const ownerIsMember = new Set(ownersInTarget.map((m) => m.userId));
    // No topic_id: the memories leave their topic (a hub_id-only move to their own hub just clears it).
    const topicId = topic ? topic.id : null;
    const reasons = new Map<string, MoveSkipped["reason"]>();
    const seenPaths = new Set<string>();
    const seenHashes = new Set<string>();
    const planned: { id: string; fromHubId: string; changesHub: boolean }[] = [];
    for (const id of ids) {
      const memory = byId.get(id);
      const membership = memory && memberships.get(memory.hubId);
      if (!memory || !membership) {
        reasons.set(id, "not_found");
        continue;
      }
      if (!canEditMemory(membership.role, memory.ownerId === ctx.user.id)) {
        reasons.set(id, "not_owned");
        continue;
      }
      const changesHub = memory.hubId !== target.hub.id;
      if (!changesHub && memory.topicId === topicId) {
        reasons.set(id, "already_at_target");
        continue;
      }
      if (changesHub && !canDeleteMemory(membership.role, memory.ownerId === ctx.user.id, membership.hub)) {
        reasons.set(id, "source_delete_forbidden");
        continue;
      }
      if (changesHub && !ownerIsMember.has(memory.ownerId)) {
        reasons.set(id, "owner_not_member");
        continue;
      }
      if (changesHub && memory.sourcePath && (takenPaths.has(memory.sourcePath) || seenPaths.has(memory.sourcePath))) {
        // The target hub already holds a memory for this source_path.
        reasons.set(id, "conflict");
        continue;
      }
      if (changesHub && (takenHashes.has(memory.contentHash) || seenHashes.has(memory.contentHash))) {
        // The target hub already holds this content: a push of it there would return that memory, not
        // write a second, so a move does not either (the memory stays where it is, nothing is merged).
        reasons.set(id, "conflict");
        continue;
      }
      if (memory.sourcePath) seenPaths.add(memory.sourcePath);
      if (changesHub) seenHashes.add(memory.contentHash);
      planned.push({ id, fromHubId: memory.hubId, changesHub });
    }
    // Every counter the moves will change, taken at once in the triggers' order. The owners' too: a move
    // changes no owner, but one from a hub its owner is no longer in to one they are in counts for them.
    const place = (hubId: string, topicId: string | null): UsageCounterKey => (topicId ? { scope: "topic", id: topicId } : { scope: "inbox", id: hubId });
    const owners = [...new Set(planned.filter((move) => move.changesHub).map((move) => byId.get(move.id)!.ownerId))];
    await lockUsageCounters(tx, [
      ...(planned.length ? [{ scope: "hub", id: target.hub.id } as const, place(target.hub.id, topicId)] : []),
      ...planned.flatMap((move) => [{ scope: "hub", id: move.fromHubId } as const, place(move.fromHubId, byId.get(move.id)!.topicId)]),
      ...owners.map((id) => ({ scope: "user", id }) as const),
    ]);
    const ownersBefore = await ownerCounters(tx, owners);
    const done: typeof planned = [];
    for (const move of planned) {
      // Conditional on the state read above (still there, same hub, still editable, and for another hub
      // still deletable, by the caller): a concurrent delete, move, role or policy change makes it
      // match nothing and the memory is skipped.
      const guard = move.changesHub
        ? { AND: [memoryWriteGuard(ctx.user.id, "edit"), memoryWriteGuard(ctx.user.id, "delete")] }
        : memoryWriteGuard(ctx.user.id, "edit");
      const { count } = await tx.memory.updateMany({
        where: { id: move.id, hubId: move.fromHubId, ...guard },
        data: { hubId: target.hub.id, topicId, updatedAt: ctx.now() },
      });
      if (count === 0) reasons.set(move.id, "not_found");
      else done.push(move);
    }
    const crossing = done.filter((move) => move.changesHub).map((move) => move.id);
    // The target hub's quota holds for memories moved in as for memories pushed (all or nothing).
    await assertHubQuotaAfterMove(tx, target.hub.id, crossing);
    await assertOwnerQuotasAfterMove(tx, ownersBefore);
    if (crossing.length) {
      await tx.chunk.updateMany({ where: { memoryId: { in: crossing } }, data: { hubId: target.hub.id } });
      await tx.attachment.updateMany({ where: { memoryId: { in: crossing } }, data: { hubId: target.hub.id } });
    }
    // The hubs they left keep no title or text of them (dream actions, reports, review bell rows, board
    // cards): their members can no longer read the memories, so not those copies either.
    const boards = await dropMemoryCopies(tx, crossing, ctx.now(), { toHubId: target.hub.id });
    const movedIds = new Set(done.map((move) => move.id));
    const movedEvents: EmitEventInput[] = ids
      .filter((id) => movedIds.has(id))
      .flatMap((id) => {
        const move = done.find((m) => m.id === id)!;
        return [
          { type: "memory.updated" as const, hubId: target.hub.id, actorId: ctx.user.id, entityId: id },
          ...(move.changesHub ? [{ type: "memory.deleted" as const, hubId: move.fromHubId, actorId: ctx.user.id, entityId: id }] : []),
        ];
      });
    const moved = done.length;
    const skipped: MoveSkipped[] = ids.flatMap((id) => (reasons.has(id) ? [{ id, reason: reasons.get(id)! }] : []));
    await emitEvent(tx, movedEvents);
    return { moved, skipped, boards };
  });
}

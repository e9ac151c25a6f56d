import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hubPermissionOrThrow, lockMembershipOrThrow, type Membership } from "@/lib/hubs/hub-access.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { topicsLockKey } from "@/lib/topics/hub-topics.ts";
import { isUuid } from "@/lib/ids.ts";
import { afterMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { RESOLVE_ACTIONS } from "@/lib/notifications/notification-kinds.ts";
import { onReviewReopened, onReviewResolved } from "@/lib/notifications/notify.ts";
import { MEMORY_DELETED_RESOLUTION, MEMORY_MOVED_RESOLUTION } from "@/lib/memories/drop-memory-copies.ts";
import { assertStorageQuota } from "@/lib/quotas/assert-storage-quota.ts";
import { serializeDreamAction } from "./serialize-dream.ts";

export const resolveDreamActionBodySchema = z.object({
  resolution: z.enum(["keep_a", "keep_b", "keep_both"], { error: "resolution is keep_a, keep_b or keep_both" }),
  /** keep_a / keep_b: the version of the memory to archive as the client read it, when it was edited after the review was flagged. */
  version: z.number({ error: "version is a whole number" }).int({ error: "version is a whole number" }).positive({ error: "version is a whole number" }).optional(),
});

const actionNotFound = (error: unknown) => {
  if (error instanceof ApiError && error.code === "not_found") throw new ApiError("not_found", "Dream action not found");
  throw error;
};

async function actionOrThrow(ctx: AuthContext, actionId: string, verb: string) {
  const action = isUuid(actionId) ? await ctx.db.dreamAction.findUnique({ where: { id: actionId } }) : null;
  if (!action) throw new ApiError("not_found", "Dream action not found");
  const membership = await hubPermissionOrThrow(ctx, action.hubId, "dreams.trigger", verb).catch(actionNotFound);
  return { action, membership };
}

/**
 * The role again, first in the write's transaction and under the hub's membership lock: a member
 * demoted or removed after the check above must not still undo or resolve (the lock comes before the
 * memory rows, in the order a hub's deletion takes them).
 */
async function stillAllowedOrThrow(tx: DbClient, ctx: AuthContext, membership: Membership, verb: string): Promise<void> {
  await lockMembershipOrThrow(tx, ctx, membership.hub, "dreams.trigger", verb).catch(actionNotFound);
}

/**
 * The updated_at an action's archive (a stale archive, the older side of a merge, the side a decided
 * review dropped) wrote. updated_at only moves forward (memories_updated_at_forward) and every write
 * sets it, reads do not: a memory past it was written by a member since (restored, archived again,
 * edited) and is theirs now. Actions from before it was recorded are not compared: the archive's
 * updated_at may lie past the action's own time (the trigger moves it past a stored value that was
 * not behind the writer's clock), and such an action would refuse every undo; for them the state and
 * superseded_by checks alone apply, as they did when those actions were written.
 */
function archivedWrite(action: { details: unknown }): { updatedAt?: { lte: Date } } {
  const { archived_updated_at: recorded } = (action.details ?? {}) as { archived_updated_at?: string };
  return recorded ? { updatedAt: { lte: new Date(recorded) } } : {};
}

/**
 * A dream's topic no member has written to since the run made it: every write through the API moves
 * updated_at past created_at (the run writes both at once), and renames, moves, pins, descriptions and
 * icons also leave their mark, for a write stamped with the same clock.
 */
function topicAsDreamMadeIt(topic: { createdAt: Date; updatedAt: Date; userModified: boolean; pinned: boolean; description: string; icon: string; archivedAt: Date | null }): boolean {
  return topic.updatedAt.getTime() === topic.createdAt.getTime() && !topic.userModified && !topic.pinned && topic.description === "" && topic.icon === "" && topic.archivedAt === null;
}

/**
 * POST /v1/dreams/actions/:id/undo: puts back what the action changed — a
 * merge is split (the archived memory returns, superseded_by cleared), an
 * archived memory is restored, an organized memory leaves the topic (a topic
 * the run created goes when it empties), a resolved review reopens. Undone
 * actions are not redone by later runs.
 */
export async function undoDreamAction(ctx: AuthContext, actionId: string) {
  const { action, membership } = await actionOrThrow(ctx, actionId, "undo dream actions");
  if (action.state === "undone") throw new ApiError("conflict", "This action was already undone");
  if (action.actionType === "contradiction" && action.state === "pending_review") throw new ApiError("conflict", "Nothing to undo: this review is still open; resolve it instead");
  if (action.resolution === MEMORY_DELETED_RESOLUTION) throw new ApiError("conflict", "Nothing to reopen: this review closed when one of its memories was deleted");
  if (action.resolution === MEMORY_MOVED_RESOLUTION) throw new ApiError("conflict", "Nothing to reopen: this review closed when one of its memories moved to another hub");
  const now = ctx.now();
  let reprocess: string | undefined;
  // The action as read above, still so: of two undos (or an undo and a resolve) at once, one applies
  // and the other is a 409 that rolls back its writes, rather than both acting on a state that is gone.
  const settle = async (tx: DbClient, data: { state: string; resolution: string | null; resolvedBy: string | null; resolvedAt: Date | null }) => {
    const { count } = await tx.dreamAction.updateMany({ where: { id: action.id, state: action.state, resolution: action.resolution }, data });
    if (count === 0) throw new ApiError("conflict", "This action was undone or decided meanwhile; read it again");
    return tx.dreamAction.findUniqueOrThrow({ where: { id: action.id } });
  };
  const updated = await ctx.db.$transaction(async (tx) => {
    // The memories whose state, topic or text the undo changes: each a memory.updated, as the same change
    // through PATCH or a topic's endpoints is (without, a client syncing by the stream never heard of
    // one coming back or leaving its topic). Emitted last, as emitEvent asks.
    const changed = new Set<string>();
    const announce = async <T>(result: T): Promise<T> => {
      await emitEvent(tx, [...changed].map((id) => ({ type: "memory.updated" as const, hubId: action.hubId, actorId: ctx.user.id, entityId: id })));
      return result;
    };
    await stillAllowedOrThrow(tx, ctx, membership, "undo dream actions");
    // An organize undo may delete the topic it empties: the hub's topic tree is held (before the memory
    // rows, as a topic change takes them), so a filing into that topic either lands first (the topic is
    // not empty and stays) or waits and finds it gone — never filed into a topic deleted under it.
    // Held for the topic it files back into too, which a delete's batches (under the same lock) may be emptying.
    if (action.actionType === "organize" && (action.toTopicId || action.fromTopicId)) await lockForTransaction(tx, topicsLockKey(action.hubId));
    const [first, second] = action.sourceMemoryIds;
    // Both memories before either write, in id order: the older is restored first, but it may have the higher id.
    await lockMemoryRows(tx, action.sourceMemoryIds, [action.hubId]);
    if (action.actionType === "merge") {
      // As for a stale archive below: only while the memory is as the merge left it. superseded_by alone
      // did not tell: a restore by PATCH left it (memories restored before it cleared it still have it),
      // and a member's later archive by hand was split.
      const restored = await tx.memory.updateMany({
        where: { id: first!, hubId: action.hubId, state: "archived", supersededBy: second!, ...archivedWrite(action) },
        data: { state: "active", supersededBy: null, updatedAt: now },
      });
      if (restored.count === 0) throw new ApiError("conflict", "The merged memory was changed or deleted since; nothing to split");
      changed.add(first!);
      // A kept memory the chat model rewrote gets its own content back, byte for byte — unless it was edited since (that edit wins).
      const details = (action.details ?? {}) as { rewritten?: boolean; original_content?: string; original_content_hash?: string; original_content_changed_at?: string; merged_content_hash?: string };
      if (details.rewritten && typeof details.original_content === "string" && details.original_content_hash && details.merged_content_hash) {
        const [stamped] = await tx.$queryRaw<{ contentChangedAt: Date; ownerId: string; bytes: number }[]>`
          SELECT content_changed_at AS "contentChangedAt", owner_id::text AS "ownerId", octet_length(content) AS bytes FROM memories WHERE id = ${second!}::uuid AND hub_id = ${action.hubId}::uuid`;
        const back = await tx.memory.updateMany({
          where: { id: second!, hubId: action.hubId, contentHash: details.merged_content_hash },
          // summary: the merged text's, which still quotes the other memory; the summarise step writes it anew.
          data: { content: details.original_content, contentHash: details.original_content_hash, version: { increment: 1 }, processingStatus: "pending", processingAttempts: 0, processingError: null, summary: "", updatedAt: now },
        });
        if (back.count === 1) {
          // The original may be longer than the merged text: putting it back is held to the hub's quota, and
          // its owner's while they are a member, as an edit growing it would be (413, nothing undone).
          await assertStorageQuota(tx, { ownerId: stamped!.ownerId, hubId: action.hubId, bytes: Buffer.byteLength(details.original_content, "utf8") - stamped!.bytes, memories: 0 });
          // The content trigger stamped the restored text as written now, and the next run's keep choice
          // would take it for newer than its duplicates. It is as old as before the merge; a title edit
          // since the merge (stamped past the merge's write, the action's created_at) keeps its own time.
          const restoredAt = stamped && stamped.contentChangedAt > action.createdAt ? stamped.contentChangedAt : details.original_content_changed_at ? new Date(details.original_content_changed_at) : undefined;
          if (restoredAt) await tx.memory.update({ where: { id: second! }, data: { contentChangedAt: restoredAt } });
          reprocess = second!;
          changed.add(second!);
        }
      }
    } else if (action.actionType === "archive") {
      // Only while the memory is as the archive left it. Archived alone did not tell: a member who restored
      // it by hand and archived it again later had that decision of theirs undone by the dream's old action.
      const restored = await tx.memory.updateMany({ where: { id: first!, hubId: action.hubId, state: "archived", ...archivedWrite(action) }, data: { state: "active", updatedAt: now } });
      if (restored.count === 0) throw new ApiError("conflict", "The memory was restored, changed or deleted since this dream archived it; nothing to undo (change it from the memory itself)");
      changed.add(first!);
    } else if (action.actionType === "organize") {
      // Back into its earlier topic while it is there: one gone or being deleted (hidden, its memories taken
      // out a batch at a time) is no place to put it back, and the memory goes to the inbox.
      const back = action.fromTopicId ? await tx.topic.findFirst({ where: { id: action.fromTopicId, hubId: action.hubId, deletingAt: null }, select: { id: true } }) : null;
      const moved = await tx.memory.updateMany({ where: { id: first!, hubId: action.hubId, topicId: action.toTopicId }, data: { topicId: back?.id ?? null, updatedAt: now } });
      if (moved.count) changed.add(first!);
      // A topic a dream created goes away once undoing empties it. Subtopics a member made under it
      // keep it: deleting it would lift them (and their memories) to the top of the tree. So does any
      // write of a member's to the topic itself (a rename, a move, a pin, a description, an icon, a
      // reorder, an archive): the topic is theirs then, and the undo of one filing took it with it.
      if (action.toTopicId && (await tx.dreamAction.count({ where: { hubId: action.hubId, toTopicId: action.toTopicId, createdTopic: true } })) > 0) {
        const topic = await tx.topic.findFirst({ where: { id: action.toTopicId, hubId: action.hubId } });
        // A topic being deleted is its delete's to finish (deleted here, that delete found nothing left).
        const untouched = topic && !topic.deletingAt && topicAsDreamMadeIt(topic);
        const left = untouched ? (await tx.memory.count({ where: { topicId: action.toTopicId } })) + (await tx.topic.count({ where: { parentId: action.toTopicId } })) : 1;
        if (left === 0) {
          const gone = await tx.topic.deleteMany({ where: { id: action.toTopicId, hubId: action.hubId } });
          if (gone.count) await emitEvent(tx, { type: "topic.changed", hubId: action.hubId, actorId: ctx.user.id, entityId: action.toTopicId });
        }
      }
    } else if (action.actionType === "contradiction") {
      // A review is between two memories of its hub: with one deleted since, there is nothing left to
      // decide; with one moved to another hub, reopening it would show this hub a memory it no longer
      // holds (a move closes the open reviews for that reason, but leaves decided ones as they were).
      const here = await tx.memory.count({ where: { id: { in: action.sourceMemoryIds }, hubId: action.hubId } });
      if (here < 2) {
        const anywhere = await tx.memory.count({ where: { id: { in: action.sourceMemoryIds } } });
        if (anywhere < 2) throw new ApiError("conflict", "Nothing to reopen: one of this review's memories was deleted since");
        throw new ApiError("conflict", "Nothing to reopen: one of this review's memories has moved to another hub since");
      }
      // Reopen the review: the side archived by keep_a / keep_b comes back.
      const loser = action.resolution === "keep_a" ? second : action.resolution === "keep_b" ? first : undefined;
      const winner = action.resolution === "keep_a" ? first : second;
      // In this hub only (and so locked above): moved to another since, it is not this hub's to bring back.
      if (loser) {
        // Only while it is as the decision left it (see archivedWrite): archived again by hand since, it stays so.
        const back = await tx.memory.updateMany({
          where: { id: loser, hubId: action.hubId, state: "archived", supersededBy: winner!, ...archivedWrite(action) },
          data: { state: "active", supersededBy: null, updatedAt: now },
        });
        if (back.count) changed.add(loser);
      }
      const reopened = await settle(tx, { state: "pending_review", resolution: null, resolvedBy: null, resolvedAt: null });
      await onReviewReopened(tx, action.id, action.hubId, now);
      return announce(reopened);
    }
    return announce(await settle(tx, { state: "undone", resolution: "undone", resolvedBy: ctx.user.id, resolvedAt: now }));
  });
  if (reprocess) afterMemoryWrite({ id: reprocess, hubId: action.hubId, processingStatus: "pending" });
  return serializeDreamAction(updated);
}

/**
 * Whether a side of a review was written since the run read it: its content_changed_at (or version)
 * then, recorded in the review's details, against its own now — one clock. The review's created_at is
 * the dream worker's clock and content_changed_at the writer's (moved forward by the database): a
 * writer's clock ahead of the worker's made an untouched side look edited, one behind hid an edit.
 * Reviews flagged before the sides were recorded are compared with their created_at, as they were.
 */
function editedSinceFlagged(action: { details: unknown; createdAt: Date }, side: "a" | "b", current: { version: number; contentChangedAt: Date }): boolean {
  const read = ((action.details ?? {}) as Record<string, { version?: unknown; content_changed_at?: unknown } | undefined>)[side];
  if (typeof read?.content_changed_at !== "string") return current.contentChangedAt > action.createdAt;
  if (typeof read.version === "number" && read.version !== current.version) return true;
  return current.contentChangedAt.getTime() !== new Date(read.content_changed_at).getTime();
}

/** POST /v1/dreams/actions/:id/resolve: a contradiction review — keep A (B archived), keep B (A archived), or keep both. */
/**
 * `checkEdits`: refuse to archive a side edited since the review was flagged unless `version` names it as
 * read now (the dashboard and POST /v1/dreams/actions/:id/resolve). Resolving through the notification
 * (Memax's clients: POST /v1/notifications/:id/resolve carries no version) decides as chosen, as before.
 */
export async function resolveDreamAction(ctx: AuthContext, actionId: string, resolution: "keep_a" | "keep_b" | "keep_both", version?: number, checkEdits = true) {
  const { action, membership } = await actionOrThrow(ctx, actionId, "resolve dream reviews");
  if (action.actionType !== "contradiction") throw new ApiError("invalid_request", "Only contradiction reviews are resolved; undo other actions");
  if (action.state !== "pending_review") throw new ApiError("conflict", `This review was already resolved (${action.resolution})`);
  const now = ctx.now();
  const [a, b] = action.sourceMemoryIds;
  const updated = await ctx.db.$transaction(async (tx) => {
    let dropped: { id: string; updatedAt: Date } | undefined;
    await stillAllowedOrThrow(tx, ctx, membership, "resolve dream reviews");
    if (resolution !== "keep_both") {
      const [keep, drop] = resolution === "keep_a" ? [a!, b!] : [b!, a!];
      // Both rows held until commit (as undo holds them): the memory kept cannot go while the other is archived in its favour.
      await lockMemoryRows(tx, [keep, drop], [action.hubId]);
      const kept = await tx.memory.findFirst({ where: { id: keep, hubId: action.hubId }, select: { state: true } });
      // Keeping a memory deleted, moved or archived since would leave neither side: the other stays as it is.
      if (kept?.state !== "active") {
        throw new ApiError("conflict", `The memory to keep (${resolution === "keep_a" ? "A" : "B"}) was deleted, moved or archived since; restore it, or resolve with another choice`, {
          memory_id: keep,
        });
      }
      // The review shows both sides as the run read them: a side a member wrote to since is archived
      // only by someone who has read it as it is now and says so with its current version. Otherwise the
      // decision archived unseen a rewrite that may have settled the disagreement.
      const current = await tx.memory.findFirst({ where: { id: drop, hubId: action.hubId, state: "active" }, select: { version: true, contentChangedAt: true } });
      if (current && (version !== undefined ? version !== current.version : checkEdits && editedSinceFlagged(action, resolution === "keep_a" ? "b" : "a", current))) {
        throw new ApiError(
          "conflict",
          `The memory to archive (${resolution === "keep_a" ? "B" : "A"}) was edited since this review was flagged; read it as it is now, then resolve again with its version, or keep both`,
          { memory_id: drop, version: current.version },
        );
      }
      const [archived] = await tx.memory.updateManyAndReturn({ where: { id: drop, hubId: action.hubId, state: "active" }, data: { state: "archived", supersededBy: keep, updatedAt: now }, select: { updatedAt: true } });
      if (archived) dropped = { id: drop, updatedAt: archived.updatedAt };
    }
    const changed = await tx.dreamAction.updateMany({ where: { id: action.id, state: "pending_review" }, data: { state: "resolved", resolution, resolvedBy: ctx.user.id, resolvedAt: now } });
    if (changed.count === 0) throw new ApiError("conflict", "This review was resolved meanwhile");
    // What the archive wrote, for an undo to bring the side back only while it still has it (see archivedWrite).
    if (dropped) {
      await tx.$executeRaw`UPDATE dream_actions SET details = details || jsonb_build_object('archived_updated_at', ${dropped.updatedAt.toISOString()}::text) WHERE id = ${action.id}::uuid`;
    }
    await onReviewResolved(tx, action.id, RESOLVE_ACTIONS.review_contradiction![resolution]!, now);
    // The side archived, as an archive through PATCH announces it (see undoDreamAction).
    if (dropped) await emitEvent(tx, { type: "memory.updated", hubId: action.hubId, actorId: ctx.user.id, entityId: dropped.id });
    return tx.dreamAction.findUniqueOrThrow({ where: { id: action.id } });
  });
  return serializeDreamAction(updated);
}

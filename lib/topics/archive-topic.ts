import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { HubTopics } from "./hub-topics.ts";
import { topicOrThrow } from "./topic-or-throw.ts";

/**
 * Archives a topic with its whole branch. Memories keep their topic (restore
 * is lossless); the branch leaves the tree and turns read-only. Idempotent:
 * `archived_count` counts only topics that were active.
 */
export async function archiveTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "archive topics");
  const now = ctx.now();
  const count = await ctx.db.$transaction(async (tx) => {
    const topics = await HubTopics.lockAndLoad(tx, topic.hubId, { ctx, action: "archive topics" });
    // Deleted, or its delete begun, since the check above: an empty branch answered archived_count 0.
    if (!topics.byId.has(topic.id)) throw new ApiError("not_found", "Topic not found");
    const branch = topics.subtree(topic.id);
    const active = branch.filter((row) => !row.archivedAt).map((row) => row.id);
    if (active.length) {
      await tx.topic.updateMany({ where: { id: { in: active } }, data: { archivedAt: now, updatedAt: now } });
      await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id });
    }
    return active.length;
  });
  return { topic_id: topic.id, archived_count: count };
}

/**
 * Restores a topic with its branch. When its parent is still archived, the
 * topic comes back at the root so it never hangs under a hidden node (a name
 * already taken there is duplicate_name). Idempotent: `restored_count` counts
 * only topics that were archived.
 */
export async function restoreTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "restore topics");
  const now = ctx.now();
  try {
    const count = await ctx.db.$transaction(async (tx) => {
      const topics = await HubTopics.lockAndLoad(tx, topic.hubId, { ctx, action: "restore topics" });
      const current = topics.byId.get(topic.id);
      if (!current) throw new ApiError("not_found", "Topic not found");
      const branch = topics.subtree(current.id);
      const archived = branch.filter((row) => row.archivedAt).map((row) => row.id);
      if (archived.length === 0) return 0;
      const parent = current.parentId ? topics.byId.get(current.parentId) : undefined;
      if (current.parentId && (!parent || parent.archivedAt)) {
        topics.assertNameFree(null, current.name, current.id);
        await tx.topic.update({ where: { id: current.id }, data: { parentId: null, position: topics.nextPosition(null) } });
      }
      await tx.topic.updateMany({ where: { id: { in: archived } }, data: { archivedAt: null, updatedAt: now } });
      await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: current.id });
      return archived.length;
    });
    return { topic_id: topic.id, restored_count: count };
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("duplicate_name", `A topic named "${topic.name}" already exists at the root`);
    throw error;
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { HubTopics } from "./hub-topics.ts";
import { serializeTopic } from "./serialize-topic.ts";
import type { UpdateTopicBody } from "./topic-fields.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";
import { assertNotArchived, topicOrThrow } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";

/**
 * Renames, describes, re-icons, pins, reorders or moves a topic (with its
 * branch); its memories stay. A move is checked against the whole tree: the
 * parent must be an active topic of the same hub (invalid_parent), not inside
 * the branch (cycle_detected), and the branch must stay within 5 levels
 * (max_depth_subtree). A rename or move marks the topic user_modified.
 * Archived topics are read-only (topic_archived).
 */
export async function updateTopic(ctx: AuthContext, id: string, input: UpdateTopicBody) {
  const { topic } = await topicOrThrow(ctx, id, "change topics");
  try {
    const updated = await ctx.db.$transaction(async (tx) => {
      const topics = await HubTopics.lockAndLoad(tx, topic.hubId, { ctx, action: "change topics" });
      const current = topics.byId.get(topic.id);
      if (!current) throw new ApiError("not_found", "Topic not found");
      assertNotArchived(current);
      const parentId = input.parent_id === undefined ? current.parentId : input.parent_id;
      const moves = parentId !== current.parentId;
      if (moves) topics.assertMove(current.id, parentId);
      const name = input.name ?? current.name;
      if (moves || name !== current.name) topics.assertNameFree(parentId, name, current.id);
      const renamed = input.name !== undefined && input.name !== current.name;
      const position = input.position ?? (moves ? topics.nextPosition(parentId) : current.position);
      // An update that sets what is already there changes nothing, so it tells nothing (as an unfiling
      // of a memory not in the topic does): it neither moves updated_at nor wakes every stream.
      const changes = renamed || moves || position !== current.position ||
        (input.description !== undefined && input.description !== current.description) ||
        (input.icon !== undefined && input.icon !== current.icon) ||
        (input.pinned !== undefined && input.pinned !== current.pinned);
      if (!changes) return current;
      const row = await tx.topic.update({
        where: { id: current.id },
        data: {
          name: input.name,
          description: input.description,
          icon: input.icon,
          pinned: input.pinned,
          parentId,
          position,
          ...((renamed || moves) && { userModified: true }),
          updatedAt: ctx.now(),
        },
      });
      await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: current.id });
      return row;
    });
    const counts = await topicMemoryCounts(ctx.db, updated.hubId, [updated.id]);
    return serializeTopic(updated, counts.get(updated.id) ?? 0);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("duplicate_name", `A topic named "${input.name}" already exists here`);
    // Deleted by someone else between the check and the update.
    if ((error as { code?: unknown })?.code === "P2025") throw new ApiError("not_found", "Topic not found");
    throw error;
  }
}

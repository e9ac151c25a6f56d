import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { HubTopics } from "./hub-topics.ts";
import type { ReorderBody } from "./topic-fields.ts";
import { topicHubId } from "./topic-hub.ts";
import { readableTopicWhere } from "./topic-or-throw.ts";

/**
 * Applies position (and optionally parent) changes to many topics of one hub
 * at once, all or nothing. Each operation is checked against the tree as the
 * earlier ones left it: the same rules as a single move.
 */
export async function reorderTopics(ctx: AuthContext, input: ReorderBody) {
  // Scoped as every topic lookup is (the key's hubs too): a topic of the owner's other hubs must not
  // answer differently from one that does not exist.
  const first = await ctx.db.topic.findFirst({ where: { id: input.operations[0]!.topic_id, ...readableTopicWhere(ctx) }, select: { hubId: true } });
  const hubId = first?.hubId ?? (await topicHubId(ctx, undefined));
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "topics.manage", "reorder topics");
  const now = ctx.now();
  const updated = await ctx.db.$transaction(async (tx) => {
    const topics = await HubTopics.lockAndLoad(tx, hub.id, { ctx, action: "reorder topics" });
    // The topics written, once each: the count of operations told a client sending its whole order back
    // after moving one topic that every topic had changed.
    const changed = new Set<string>();
    for (const [index, op] of input.operations.entries()) {
      const topic = topics.byId.get(op.topic_id);
      if (!topic) throw new ApiError("not_found", "Topic not found", { index, topic_id: op.topic_id });
      if (topic.archivedAt) throw new ApiError("topic_archived", "This topic is archived; restore it first", { index, topic_id: topic.id });
      const parentId = op.parent_id === undefined ? topic.parentId : op.parent_id;
      if (parentId !== topic.parentId) {
        topics.assertMove(topic.id, parentId);
        topics.assertNameFree(parentId, topic.name, topic.id);
      } else if (op.position === topic.position) {
        continue;
      }
      changed.add(topic.id);
      const row = await tx.topic.update({
        where: { id: topic.id },
        data: { position: op.position, parentId, ...(parentId !== topic.parentId && { userModified: true }), updatedAt: now },
      });
      topics.byId.set(row.id, row);
      topics.rows.splice(topics.rows.findIndex((r) => r.id === row.id), 1, row);
    }
    // One event for the whole reorder: a client refetches the tree once. None for a reorder that set
    // what was already there (a client sending its whole order back after moving nothing).
    if (changed.size) await emitEvent(tx, { type: "topic.changed", hubId: hub.id, actorId: ctx.user.id });
    return changed.size;
  });
  return { hub_id: hub.id, updated };
}

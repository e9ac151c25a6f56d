import type { AuthContext } from "@/lib/api/context.ts";
import { HubTopics } from "./hub-topics.ts";
import { topicOrThrow } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { lockMemoriesOf } from "@/lib/db/row-lock.ts";

/**
 * Deletes a topic and its whole branch (like archive, a branch goes as one).
 * Memories are never deleted with a topic: those filed under the branch stay
 * in the hub, without a topic (the foreign key sets topic_id to null).
 */
export async function deleteTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "delete topics");
  const ids = await ctx.db.$transaction(async (tx) => {
    const branch = (await HubTopics.lockAndLoad(tx, topic.hubId, { ctx, action: "delete topics" })).subtree(topic.id).map((row) => row.id);
    // Their memories go to the inbox by the foreign key's cascade: locked first, in id order.
    await lockMemoriesOf(tx, topic.hubId, branch);
    // deleteMany: a concurrent delete of the same topic is not an error, the outcome is the same.
    await tx.topic.deleteMany({ where: { id: { in: branch }, hubId: topic.hubId } });
    await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id });
    return branch;
  });
  return { id: topic.id, topic_id: topic.id, deleted: true as const, deleted_count: ids.length };
}

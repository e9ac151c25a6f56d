import type { AuthContext } from "@/lib/api/context.ts";
import { purgeBatchSize } from "@/lib/hubs/purge-deleted-hubs.ts";
import { HubTopics } from "./hub-topics.ts";
import { topicOrThrow } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { lockMemoriesOf } from "@/lib/db/row-lock.ts";

/**
 * Deletes a topic and its whole branch (like archive, a branch goes as one).
 * Memories are never deleted with a topic: those filed under the branch stay
 * in the hub, without a topic. They leave it a bounded batch per transaction
 * (ENGRAM_PURGE_BATCH): all in the delete's one transaction, a topic of tens of
 * thousands of memories outlasted the transaction timeout and was rolled back
 * on every attempt, so it could never be deleted. The topics go with the last
 * batch, whose few memories the foreign key's cascade takes out.
 *
 * The first batch marks the branch as being deleted (deletingAt) in its transaction: read again by
 * each batch, a subtopic moved out between two batches lost part of its memories' filing and was
 * kept. Marked, the branch's topics are hidden and refused to every move, change and filing, so the
 * branch each batch reads is the one the delete began with; a delete cut short is finished by
 * sending it again. Every committed batch is announced: one cut short has told the streams what it
 * unfiled.
 */
export async function deleteTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "delete topics", { withDeleting: true });
  const batch = purgeBatchSize();
  for (;;) {
    const deleted = await ctx.db.$transaction(async (tx) => {
      // Each batch under the hub's topic lock, with the caller's right to manage topics checked again.
      const topics = await HubTopics.lockAndLoad(tx, topic.hubId, { ctx, action: "delete topics" }, { withDeleting: true });
      const branch = topics.subtree(topic.id).map((row) => row.id);
      if (branch.length) {
        await tx.topic.updateMany({ where: { id: { in: branch }, hubId: topic.hubId, deletingAt: null }, data: { deletingAt: ctx.now() } });
        // In id order, as every writer of several memories locks them (lib/db/row-lock.ts).
        const filed = await tx.$queryRaw<{ id: string }[]>`
          SELECT id::text AS id FROM memories WHERE hub_id = ${topic.hubId}::uuid AND topic_id = ANY(${branch}::uuid[])
           ORDER BY id LIMIT ${batch + 1} FOR NO KEY UPDATE`;
        if (filed.length > batch) {
          await tx.memory.updateMany({ where: { id: { in: filed.slice(0, batch).map((row) => row.id) }, hubId: topic.hubId }, data: { topicId: null } });
          await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id });
          return null;
        }
      }
      // Their memories go to the inbox by the foreign key's cascade: locked first, in id order.
      await lockMemoriesOf(tx, topic.hubId, branch);
      // deleteMany: a concurrent delete of the same topic is not an error, the outcome is the same; but
      // having deleted nothing, this one announces nothing (every stream of the hub refetched the tree).
      const { count } = await tx.topic.deleteMany({ where: { id: { in: branch }, hubId: topic.hubId } });
      if (count > 0) await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id });
      return count;
    });
    if (deleted !== null) return { id: topic.id, topic_id: topic.id, deleted: true as const, deleted_count: deleted };
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { topicOrThrow } from "./topic-or-throw.ts";
import { eventsStatement } from "@/lib/events/emit-event.ts";

/** Deletes a topic; its memories stay, without a topic (the foreign key sets topic_id to null). */
export async function deleteTopic(ctx: AuthContext, id: string) {
  const { topic } = await topicOrThrow(ctx, id, "delete topics");
  // deleteMany: a concurrent delete of the same topic is not an error, the outcome is the same.
  await ctx.db.$transaction([
    ctx.db.topic.deleteMany({ where: { id: topic.id, hubId: topic.hubId } }),
    eventsStatement(ctx.db, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id }),
  ]);
  return { id: topic.id, deleted: true as const };
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { assertTopicNameFree } from "./assert-topic-name-free.ts";
import { serializeTopic } from "./serialize-topic.ts";
import type { UpdateTopicBody } from "./topic-fields.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";
import { topicOrThrow } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";

/** Renames a topic; its memories keep it. A change of case only is allowed. */
export async function updateTopic(ctx: AuthContext, id: string, input: UpdateTopicBody) {
  const { topic } = await topicOrThrow(ctx, id, "rename topics");
  try {
    const updated = await ctx.db.$transaction(async (tx) => {
      await assertTopicNameFree(tx, topic.hubId, input.name, topic.id);
      await emitEvent(tx, { type: "topic.changed", hubId: topic.hubId, actorId: ctx.user.id, entityId: topic.id });
      return tx.topic.update({ where: { id: topic.id }, data: { name: input.name, updatedAt: ctx.now() } });
    });
    const counts = await topicMemoryCounts(ctx.db, [updated.id]);
    return serializeTopic(updated, counts.get(updated.id) ?? 0);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("conflict", `This hub already has a topic named "${input.name}"`);
    // Deleted by someone else between the check and the update.
    if ((error as { code?: unknown })?.code === "P2025") throw new ApiError("not_found", "Topic not found");
    throw error;
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { readableTopicOrThrow } from "./topic-or-throw.ts";

/**
 * Records that the caller opened a topic now (Memax's `topics.markVisit`): one row per topic and
 * member, overwritten by each visit, so later reads can tell what changed since. Any member may
 * visit, archived topics included (they can still be opened).
 */
export async function visitTopic(ctx: AuthContext, id: string) {
  const { topic } = await readableTopicOrThrow(ctx, id);
  const visitedAt = ctx.now();
  await ctx.db.topicVisit.upsert({
    where: { topicId_userId: { topicId: topic.id, userId: ctx.user.id } },
    create: { topicId: topic.id, userId: ctx.user.id, visitedAt },
    update: { visitedAt },
  });
  return { topic_id: topic.id, visited_at: visitedAt.toISOString(), status: "ok" as const };
}

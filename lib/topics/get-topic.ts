import type { AuthContext } from "@/lib/api/context.ts";
import { HubTopics } from "./hub-topics.ts";
import { serializeTopic } from "./serialize-topic.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";
import { readableTopicOrThrow } from "./topic-or-throw.ts";

/**
 * One topic (archived ones too) with its own and its branch's memory counts; any member may read it.
 * An active topic's branch is the one the tree shows (GET /v1/topics): archived subtopics are left
 * out, with whatever is below them. An archived topic's branch is what was archived with it and
 * comes back with it: the archived topics below it.
 */
export async function getTopic(ctx: AuthContext, id: string) {
  const { topic } = await readableTopicOrThrow(ctx, id);
  // The topic itself whatever its state now: archived or restored since the read above, it still has its own count.
  const topics = await ctx.db.topic.findMany({ where: { hubId: topic.hubId, OR: [{ id: topic.id }, { archivedAt: topic.archivedAt ? { not: null } : null }] } });
  const branch = new HubTopics(topics).subtree(topic.id);
  const counts = await topicMemoryCounts(ctx.db, topic.hubId, branch.map((row) => row.id));
  return {
    ...serializeTopic(topic, counts.get(topic.id) ?? 0),
    total_memory_count: branch.reduce((sum, row) => sum + (counts.get(row.id) ?? 0), 0),
  };
}

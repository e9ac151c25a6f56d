import type { AuthContext } from "@/lib/api/context.ts";
import { HubTopics } from "./hub-topics.ts";
import { serializeTopic } from "./serialize-topic.ts";
import { topicMemoryCounts } from "./topic-memory-counts.ts";
import { readableTopicOrThrow } from "./topic-or-throw.ts";

/** One topic (archived ones too) with its own and its branch's memory counts; any member may read it. */
export async function getTopic(ctx: AuthContext, id: string) {
  const { topic } = await readableTopicOrThrow(ctx, id);
  const branch = new HubTopics(await ctx.db.topic.findMany({ where: { hubId: topic.hubId } })).subtree(topic.id);
  const counts = await topicMemoryCounts(ctx.db, topic.hubId, branch.map((row) => row.id));
  return {
    ...serializeTopic(topic, counts.get(topic.id) ?? 0),
    total_memory_count: branch.reduce((sum, row) => sum + (counts.get(row.id) ?? 0), 0),
  };
}

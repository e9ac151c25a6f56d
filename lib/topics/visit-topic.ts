import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readableTopicOrThrow } from "./topic-or-throw.ts";

/**
 * Records that the caller opened a topic now (Memax's `topics.markVisit`): one row per topic and
 * member holding the latest visit, so later reads can tell what changed since. Any member may
 * visit, archived topics included (they can still be opened). Answers the stored visit.
 */
export async function visitTopic(ctx: AuthContext, id: string) {
  const { topic } = await readableTopicOrThrow(ctx, id);
  // GREATEST, not an overwrite: a visit stamped earlier that commits later (a slow request, another
  // process's clock) moved the stored visit back, and a client asking "what changed since" was shown
  // again what it had already seen. From the topic row, so a topic deleted since inserts nothing, nor
  // one whose delete began since (hidden, it is not_found to every read; checked only above, it was visited).
  const [row] = await ctx.db.$queryRaw<{ visited_at: Date }[]>`
    INSERT INTO topic_visits (topic_id, user_id, visited_at)
    SELECT t.id, ${ctx.user.id}::uuid, ${ctx.now()}::timestamptz FROM topics t WHERE t.id = ${topic.id}::uuid AND t.deleting_at IS NULL
    ON CONFLICT (topic_id, user_id) DO UPDATE SET visited_at = GREATEST(topic_visits.visited_at, EXCLUDED.visited_at)
    RETURNING visited_at`;
  if (!row) throw new ApiError("not_found", "Topic not found");
  return { topic_id: topic.id, visited_at: new Date(row.visited_at).toISOString(), status: "ok" as const };
}

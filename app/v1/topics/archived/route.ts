import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listArchivedTopics } from "@/lib/topics/list-archived-topics.ts";
import { topicHubQuerySchema } from "@/lib/topics/topic-fields.ts";
import { topicHubId } from "@/lib/topics/topic-hub.ts";

// GET /v1/topics/archived — a hub's archived topics, most recently archived first
export const GET = withAuth({}, async (ctx, req) => {
  const { hub_id } = parseQuery(req, topicHubQuerySchema);
  return ok(await listArchivedTopics(ctx, await topicHubId(ctx, hub_id)));
});

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

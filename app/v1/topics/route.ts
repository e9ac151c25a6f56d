import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createTopic } from "@/lib/topics/create-topic.ts";
import { listTopics } from "@/lib/topics/list-topics.ts";
import { createTopicBodySchema, topicHubQuerySchema } from "@/lib/topics/topic-fields.ts";
import { topicHubId } from "@/lib/topics/topic-hub.ts";

// GET /v1/topics — one hub's whole topic tree (hub_id, else X-Hub-ID, else the personal hub) with memory counts
export const GET = withAuth({}, async (ctx, req) => {
  const { hub_id } = parseQuery(req, topicHubQuerySchema);
  return ok(await listTopics(ctx, await topicHubId(ctx, hub_id)));
});

// POST /v1/topics — create a topic (at the root or under parent_id) in hub_id, the parent's hub, X-Hub-ID's, or the personal hub
export const POST = withAuth({}, async (ctx, req) => ok(await createTopic(ctx, await parseJson(req, createTopicBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

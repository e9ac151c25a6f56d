import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createTopic } from "@/lib/topics/create-topic.ts";
import { listTopics } from "@/lib/topics/list-topics.ts";
import { createTopicBodySchema, listTopicsQuerySchema } from "@/lib/topics/topic-fields.ts";

// GET /v1/topics — topics of every hub the caller can read (or hub_id), by name, with memory counts
export const GET = withAuth({}, async (ctx, req) => ok(await listTopics(ctx, parseQuery(req, listTopicsQuerySchema))));

// POST /v1/topics — create a topic in hub_id, else the X-Hub-ID hub, else the personal hub
export const POST = withAuth({}, async (ctx, req) => {
  const body = await parseJson(req, createTopicBodySchema);
  const hubId = body.hub_id ?? ctx.hubHeader;
  return ok(await createTopic(ctx, { name: body.name, hubId }), 201);
});

export const { PUT, PATCH, DELETE } = methodsNotAllowed("GET", "POST");

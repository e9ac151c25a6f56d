import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { assignMemoryBodySchema } from "@/lib/topics/topic-fields.ts";
import { assignTopicMemory, listTopicMemories } from "@/lib/topics/topic-memories.ts";

type Params = { id: string };

// GET /v1/topics/{id}/memories — the memories filed under this topic, newest first, paginated
export const GET = withAuth<Params>({}, async (ctx, req, { id }) => ok(await listTopicMemories(ctx, id, parseQuery(req, listQuerySchema))));

// POST /v1/topics/{id}/memories — file a memory of the topic's hub under it
export const POST = withAuth<Params>({}, async (ctx, req, { id }) => ok(await assignTopicMemory(ctx, id, await parseJson(req, assignMemoryBodySchema))));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteTopic } from "@/lib/topics/delete-topic.ts";
import { getTopic } from "@/lib/topics/get-topic.ts";
import { updateTopicBodySchema } from "@/lib/topics/topic-fields.ts";
import { updateTopic } from "@/lib/topics/update-topic.ts";

type Params = { id: string };

// GET /v1/topics/{id} — one topic with its memory counts (any member of its hub)
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await getTopic(ctx, id)));

// PATCH /v1/topics/{id} — rename, describe, pin, reorder or move a topic (topic managers of its hub)
export const PATCH = withAuth<Params>({}, async (ctx, req, { id }) => ok(await updateTopic(ctx, id, await parseJson(req, updateTopicBodySchema))));

// DELETE /v1/topics/{id} — delete a topic and its subtopics; their memories stay, without a topic
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await deleteTopic(ctx, id)));

export const { POST, PUT, OPTIONS } = methodsNotAllowed("GET", "PATCH", "DELETE");

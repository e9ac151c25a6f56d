import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteTopic } from "@/lib/topics/delete-topic.ts";
import { updateTopicBodySchema } from "@/lib/topics/topic-fields.ts";
import { updateTopic } from "@/lib/topics/update-topic.ts";

type Params = { id: string };

// PATCH /v1/topics/{id} — rename a topic (topic managers of its hub)
export const PATCH = withAuth<Params>({}, async (ctx, req, { id }) => ok(await updateTopic(ctx, id, await parseJson(req, updateTopicBodySchema))));

// DELETE /v1/topics/{id} — delete a topic; its memories stay, without a topic
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await deleteTopic(ctx, id)));

export const { GET, POST, PUT } = methodsNotAllowed("PATCH", "DELETE");

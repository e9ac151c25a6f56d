import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { reorderTopics } from "@/lib/topics/reorder-topics.ts";
import { reorderBodySchema } from "@/lib/topics/topic-fields.ts";

// POST /v1/topics/reorder — new positions (and parents) for many topics of one hub, all or nothing
export const POST = withAuth({}, async (ctx, req) => ok(await reorderTopics(ctx, await parseJson(req, reorderBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

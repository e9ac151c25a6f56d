import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { batchMoveMemories } from "@/lib/memories/batch-move-memories.ts";
import { batchMoveBodySchema } from "@/lib/memories/memory-fields.ts";

// POST /v1/memories/batch-move — move up to 100 memories to another hub and/or topic
export const POST = withAuth({}, async (ctx, req) => ok(await batchMoveMemories(ctx, await parseJson(req, batchMoveBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { batchDeleteMemories } from "@/lib/memories/batch-delete-memories.ts";
import { batchDeleteBodySchema } from "@/lib/memories/memory-fields.ts";

// POST /v1/memories/batch-delete — delete up to 100 memories; the rest are reported as skipped
export const POST = withAuth({}, async (ctx, req) => ok(await batchDeleteMemories(ctx, await parseJson(req, batchDeleteBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

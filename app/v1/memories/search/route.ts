import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { searchMemoriesQuerySchema } from "@/lib/recall/recall-fields.ts";
import { searchMemories } from "@/lib/recall/search-memories.ts";

// GET /v1/memories/search — quick word search (BM25, then titles containing the text), no embeddings; a plain array of at most `limit`
export const GET = withAuth({}, async (ctx, req) => ok(await searchMemories(ctx, parseQuery(req, searchMemoriesQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

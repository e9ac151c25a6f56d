import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { barSearch } from "@/lib/recall/bar-search.ts";
import { barSearchQuerySchema } from "@/lib/recall/recall-fields.ts";

// GET /v1/bar/search — a search bar's quick matches: memories by their words, topics and hubs by name; an empty q is empty lists
export const GET = withAuth({}, async (ctx, req) => ok(await barSearch(ctx, parseQuery(req, barSearchQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

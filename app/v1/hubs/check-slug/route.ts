import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { checkSlug } from "@/lib/hubs/check-slug.ts";
import { checkSlugQuerySchema } from "@/lib/hubs/hub-fields.ts";

// GET /v1/hubs/check-slug — whether a slug is free for a new hub (before the create form submits)
export const GET = withAuth({}, async (ctx, req) => ok(await checkSlug(ctx, parseQuery(req, checkSlugQuerySchema).slug)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

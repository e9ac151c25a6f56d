import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listDreamsQuerySchema } from "@/lib/dreams/dream-fields.ts";
import { listDreamRuns } from "@/lib/dreams/dream-queries.ts";

// GET /v1/dreams — dream runs of every hub the caller reads (hub_id narrows), newest first
export const GET = withAuth({}, async (ctx, req) => ok(await listDreamRuns(ctx, parseQuery(req, listDreamsQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

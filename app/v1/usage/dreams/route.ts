import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { dreamUsageQuerySchema, getDreamUsage } from "@/lib/dreams/dream-usage.ts";

// GET /v1/usage/dreams — this month's dream runs of a hub, its (unlimited) quota, and whether the caller may trigger one
export const GET = withAuth({}, async (ctx, req) => ok(await getDreamUsage(ctx, parseQuery(req, dreamUsageQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

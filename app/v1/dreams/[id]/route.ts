import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getDreamRun } from "@/lib/dreams/dream-queries.ts";

// GET /v1/dreams/:id — one dream run with its counts and report
export const GET = withAuth<{ id: string }>({}, async (ctx, _req, params) => ok(await getDreamRun(ctx, params.id)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createHub } from "@/lib/hubs/create-hub.ts";
import { createHubBodySchema } from "@/lib/hubs/hub-fields.ts";
import { listHubs } from "@/lib/hubs/list-hubs.ts";

// GET /v1/hubs — every hub the caller belongs to, with role and counts (one array, ≤ 100 hubs per user)
export const GET = withAuth({}, async (ctx) => ok(await listHubs(ctx)));

// POST /v1/hubs — create a team hub owned by the caller
export const POST = withAuth({ account: true }, async (ctx, req) => ok(await createHub(ctx, await parseJson(req, createHubBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

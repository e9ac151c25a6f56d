import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getHubSummary } from "@/lib/hubs/get-hub-summary.ts";

// GET /v1/hubs/{id}/summary — counts and the caller's role, for badges and switchers
export const GET = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await getHubSummary(ctx, id)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");

import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { dreamReport } from "@/lib/dreams/dream-queries.ts";

// GET /v1/dreams/report — the latest run of the X-Hub-ID hub (else the personal hub) with its actions and open reviews
export const GET = withAuth({ permission: "memories.read" }, async (ctx) => ok(await dreamReport(ctx, ctx.hub.id)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

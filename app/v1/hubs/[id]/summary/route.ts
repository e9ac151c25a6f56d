import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getHubSummary } from "@/lib/hubs/get-hub-summary.ts";

// GET /v1/hubs/{id}/summary — counts, stats, the header greeting (in X-Timezone's local time) and the caller's role
export const GET = withAuth<{ id: string }>({}, async (ctx, req, { id }) =>
  ok(await getHubSummary(ctx, id, { timeZone: req.headers.get("x-timezone")?.trim() || undefined })),
);

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

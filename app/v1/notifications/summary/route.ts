import { ok } from "@/lib/api/envelope.ts";
import { queryParams } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { notificationSummary } from "@/lib/notifications/list-notifications.ts";

// GET /v1/notifications/summary — pending and unseen counts by kind (?hub narrows; HEAD refreshes no checklist)
export const GET = withAuth({ bucket: "light" }, async (ctx, req) => {
  const q = queryParams(req, ["hub", "hub_id"]);
  return ok(await notificationSummary(ctx, { hub: q.get("hub") || q.get("hub_id") || undefined }, { refresh: req.method !== "HEAD" }));
});

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

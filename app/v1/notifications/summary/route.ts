import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { notificationSummary } from "@/lib/notifications/list-notifications.ts";

// GET /v1/notifications/summary — pending and unseen counts by kind (?hub narrows)
export const GET = withAuth({ bucket: "light" }, async (ctx, req) => {
  const q = new URL(req.url).searchParams;
  return ok(await notificationSummary(ctx, { hub: q.get("hub") || q.get("hub_id") || undefined }));
});

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");

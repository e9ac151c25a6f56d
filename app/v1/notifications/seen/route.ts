import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { bulkNotificationsBodySchema, bulkUpdateNotifications } from "@/lib/notifications/update-notification.ts";

// POST /v1/notifications/seen — bulk for receipt kinds ({kinds, since?}; X-Hub-ID or hub narrows)
export const POST = withAuth({}, async (ctx, req) => {
  const body = await parseJson(req, bulkNotificationsBodySchema);
  return ok(await bulkUpdateNotifications(ctx, "seen", body));
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { resolveNotification, resolveNotificationBodySchema } from "@/lib/notifications/update-notification.ts";

// POST /v1/notifications/:id/resolve {action} — accept/decline an invite or an ownership transfer
export const POST = withAuth<{ id: string }>({}, async (ctx, req, params) => {
  const body = await parseJson(req, resolveNotificationBodySchema);
  return ok(await resolveNotification(ctx, params.id, body.action));
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

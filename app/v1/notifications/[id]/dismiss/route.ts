import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { dismissNotification } from "@/lib/notifications/update-notification.ts";

// POST /v1/notifications/:id/dismiss — receipts only (decisions go through /resolve)
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, params) => ok(await dismissNotification(ctx, params.id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

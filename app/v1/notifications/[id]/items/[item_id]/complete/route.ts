import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { updateNotificationItem } from "@/lib/notifications/update-notification-item.ts";

// POST /v1/notifications/{id}/items/{item_id}/complete — a checklist item is done; the last required one resolves the checklist
export const POST = withAuth<{ id: string; item_id: string }>({}, async (ctx, _req, { id, item_id }) => ok(await updateNotificationItem(ctx, id, item_id, "complete")));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

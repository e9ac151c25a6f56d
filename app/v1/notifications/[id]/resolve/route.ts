import { z } from "zod";
import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { resolveNotification } from "@/lib/notifications/update-notification.ts";

const resolveBodySchema = z.object({ action: z.string().min(1, "action is required").max(64) });

// POST /v1/notifications/:id/resolve {action} — accept/decline an invite or an ownership transfer
export const POST = withAuth<{ id: string }>({}, async (ctx, req, params) => {
  const body = await parseJson(req, resolveBodySchema);
  return ok(await resolveNotification(ctx, params.id, body.action));
});

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");

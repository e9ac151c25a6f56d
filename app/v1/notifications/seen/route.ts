import { z } from "zod";
import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { bulkUpdateNotifications } from "@/lib/notifications/update-notification.ts";

const bulkBodySchema = z.object({
  kinds: z.array(z.string().min(1).max(64)).min(1, "name at least one kind").max(50),
  since: z.iso.datetime({ offset: true }).optional(),
  hub: z.uuid().optional(),
});

// POST /v1/notifications/seen — bulk for receipt kinds ({kinds, since?}; X-Hub-ID or hub narrows)
export const POST = withAuth({}, async (ctx, req) => {
  const body = await parseJson(req, bulkBodySchema);
  return ok(await bulkUpdateNotifications(ctx, "seen", { ...body, hub: body.hub ?? (req.headers.get("x-hub-id")?.trim() || undefined) }));
});

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");

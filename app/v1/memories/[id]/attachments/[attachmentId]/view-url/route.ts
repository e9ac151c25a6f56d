import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createViewUrl } from "@/lib/attachments/create-view-url.ts";
import { config } from "@/lib/config.ts";

type Params = { id: string; attachmentId: string };

// POST /v1/memories/{id}/attachments/{attachmentId}/view-url — a short-lived signed URL to show an image inline
export const POST = withAuth<Params>({}, async (ctx, req, params) =>
  ok(await createViewUrl(ctx, params.id, params.attachmentId, config().publicUrl ?? new URL(req.url).origin)),
);

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");

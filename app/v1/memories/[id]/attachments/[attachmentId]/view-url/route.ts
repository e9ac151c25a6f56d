import { ok } from "@/lib/api/envelope.ts";
import { requestOrigin } from "@/lib/api/request-origin.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createViewUrl } from "@/lib/attachments/create-view-url.ts";

type Params = { id: string; attachmentId: string };

// POST /v1/memories/{id}/attachments/{attachmentId}/view-url — a short-lived signed URL to show an image inline
export const POST = withAuth<Params>({ reads: true }, async (ctx, req, params) =>
  ok(await createViewUrl(ctx, params.id, params.attachmentId, requestOrigin(req))),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { downloadAttachment } from "@/lib/attachments/download-attachment.ts";

type Params = { id: string; attachmentId: string };

// GET /v1/memories/{id}/attachments/{attachmentId}/download — the original file, streamed
export const GET = withAuth<Params>({}, async (ctx, req, params) => downloadAttachment(ctx, params.id, params.attachmentId, req.method === "HEAD"));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

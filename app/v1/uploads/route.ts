import { ok } from "@/lib/api/envelope.ts";
import { requestOrigin } from "@/lib/api/request-origin.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createUpload, createUploadBodySchema } from "@/lib/uploads/create-upload.ts";

// POST /v1/uploads — a signed PUT target for a file that a memory will then attach
export const POST = withAuth({ permission: "memories.write" }, async (ctx, req) => {
  const baseUrl = requestOrigin(req);
  return ok(await createUpload(ctx, await parseJson(req, createUploadBodySchema), baseUrl), 201);
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

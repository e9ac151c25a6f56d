import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { config } from "@/lib/config.ts";
import { createUpload, createUploadBodySchema } from "@/lib/uploads/create-upload.ts";

// POST /v1/uploads — a signed PUT target for a file that a memory will then attach
export const POST = withAuth({ permission: "memories.write" }, async (ctx, req) => {
  const baseUrl = config().publicUrl ?? new URL(req.url).origin;
  return ok(await createUpload(ctx, await parseJson(req, createUploadBodySchema), baseUrl), 201);
});

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");

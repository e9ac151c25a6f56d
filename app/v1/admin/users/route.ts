import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, onlyWhile, withPublic } from "@/lib/api/with-auth.ts";
import { adminRoutesEnabled, checkAdminToken } from "@/lib/auth/check-admin-token.ts";
import { adminCreateUser, adminCreateUserBodySchema } from "@/lib/users/admin-create-user.ts";

// POST /v1/admin/users — bootstrap a user and first API key with ENGRAM_ADMIN_TOKEN (404 when unset)
export const POST = withPublic({ bucket: "regular" }, async (ctx, req) => {
  checkAdminToken(req.headers.get("authorization"));
  return ok(await adminCreateUser(ctx, await parseJson(req, adminCreateUserBodySchema)), 201);
});

// Without the token the route does not exist, whatever the method.
export const { GET, PUT, PATCH, DELETE, OPTIONS } = onlyWhile(adminRoutesEnabled, methodsNotAllowed("POST"));

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, onlyWhile, withPublic } from "@/lib/api/with-auth.ts";
import { adminRoutesEnabled, checkAdminToken } from "@/lib/auth/check-admin-token.ts";
import { impersonateBodySchema, impersonateUser } from "@/lib/auth/impersonate-user.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";

// POST /v1/auth/impersonate — with ENGRAM_ADMIN_TOKEN, a 15-minute access token acting as a user (404 when unset)
export const POST = withPublic({ bucket: "heavy" }, async (ctx, req) => {
  checkAdminToken(req.headers.get("authorization"));
  return ok(await impersonateUser(ctx, await parseJson(req, impersonateBodySchema), publicOrigin(req)));
});

// Without the token the route does not exist, whatever the method.
export const { GET, PUT, PATCH, DELETE, OPTIONS } = onlyWhile(adminRoutesEnabled, methodsNotAllowed("POST"));

import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { assertNotCrossSite } from "@/lib/auth/session.ts";
import { signUp, signUpBodySchema } from "@/lib/auth/sign-up.ts";

// POST /api/auth/sign-up — open email + password sign-up (403 when ENGRAM_ALLOW_SIGNUP=false)
export const POST = withPublic({ bucket: "heavy" }, async (ctx, req) => {
  assertNotCrossSite(req);
  return ok(await signUp(ctx, await parseJson(req, signUpBodySchema, { maxBytes: 16 * 1024 })), 201);
});

export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");

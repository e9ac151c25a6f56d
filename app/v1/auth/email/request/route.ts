import { knownClientAddress } from "@/lib/api/client-address.ts";
import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { requestEmailCodeBodySchema } from "@/lib/auth/email-code-fields.ts";
import { requestEmailCode } from "@/lib/auth/request-email-code.ts";

// POST /v1/auth/email/request — mail a six-digit sign-in code (the same answer whether or not the address has an account)
export const POST = withPublic({ bucket: "heavy" }, async (ctx, req) =>
  ok(await requestEmailCode(ctx, await parseJson(req, requestEmailCodeBodySchema, { maxBytes: 16 * 1024 }), knownClientAddress(req))),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { clientAddress } from "@/lib/api/client-address.ts";
import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { verifyEmailCodeBodySchema } from "@/lib/auth/email-code-fields.ts";
import { verifyEmailCode } from "@/lib/auth/verify-email-code.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";

// POST /v1/auth/email/verify — a right code signs in: a token pair, or an exchange code for the redirect it was asked with
export const POST = withPublic({ bucket: "heavy" }, async (ctx, req) =>
  ok(await verifyEmailCode(ctx, await parseJson(req, verifyEmailCodeBodySchema, { maxBytes: 16 * 1024 }), publicOrigin(req), clientAddress(req))),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

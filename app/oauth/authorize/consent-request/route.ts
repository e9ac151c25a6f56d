import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { consentRequestQuerySchema, getConsentRequest } from "@/lib/oauth/consent-request.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";

// GET /oauth/authorize/consent-request — the consent page's pending request as JSON (Memax's auth.getOAuthConsentRequest), for its own person
export const GET = withAuth({ bucket: "light", account: true, credentials: true }, async (ctx, req) =>
  ok(await getConsentRequest(ctx, parseQuery(req, consentRequestQuerySchema), publicOrigin(req))),
);

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

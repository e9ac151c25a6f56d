import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { exchangeCliCode, exchangeCliCodeBodySchema } from "@/lib/oauth/exchange-cli-code.ts";

// POST /v1/auth/exchange — the CLI's sign-in code for an access and refresh token pair (single use)
export const POST = withPublic({ bucket: "light" }, async (ctx, req) => ok(await exchangeCliCode(ctx, await parseJson(req, exchangeCliCodeBodySchema, { maxBytes: 16 * 1024 }))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

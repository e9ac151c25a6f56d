import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { refreshCliToken, refreshCliTokenBodySchema } from "@/lib/oauth/refresh-cli-token.ts";

// POST /v1/auth/refresh — rotate the CLI's refresh token for a new pair (a replayed one ends the sign-in)
export const POST = withPublic({ bucket: "light" }, async (ctx, req) => ok(await refreshCliToken(ctx, await parseJson(req, refreshCliTokenBodySchema, { maxBytes: 16 * 1024 }))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

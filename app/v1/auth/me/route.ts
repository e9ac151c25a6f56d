import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getMe, updateMe, updateMeBodySchema } from "@/lib/users/get-me.ts";

// GET /v1/auth/me — who the credential belongs to
export const GET = withAuth({ bucket: "light" }, async (ctx) => ok(await getMe(ctx)));

// PATCH /v1/auth/me — rename the calling user ({ display_name }, or { name })
export const PATCH = withAuth({ bucket: "regular", account: true }, async (ctx, req) => ok(await updateMe(ctx, await parseJson(req, updateMeBodySchema))));

export const { POST, PUT, DELETE, OPTIONS } = methodsNotAllowed("GET", "PATCH");

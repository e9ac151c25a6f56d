import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { localDeleteConfig } from "@/lib/configs/ack-configs.ts";
import { localDeleteBodySchema } from "@/lib/configs/config-fields.ts";

// POST /v1/configs/local-delete — remove a config from one device only
export const POST = withAuth({ personal: true }, async (ctx, req) => ok(await localDeleteConfig(ctx, await parseJson(req, localDeleteBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

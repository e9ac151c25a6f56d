import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { ackConfigs } from "@/lib/configs/ack-configs.ts";
import { ackConfigsBodySchema } from "@/lib/configs/config-fields.ts";

// POST /v1/configs/ack — the device reports the versions (or deletions) it now holds
export const POST = withAuth({ personal: true }, async (ctx, req) => ok(await ackConfigs(ctx, await parseJson(req, ackConfigsBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

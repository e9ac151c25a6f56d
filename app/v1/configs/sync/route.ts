import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { syncConfigsBodySchema } from "@/lib/configs/config-fields.ts";
import { syncConfigs } from "@/lib/configs/sync-configs.ts";

// POST /v1/configs/sync — one action per file from the device's manifest and its last-synced state
export const POST = withAuth({ reads: true, personal: true }, async (ctx, req) => ok(await syncConfigs(ctx, await parseJson(req, syncConfigsBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

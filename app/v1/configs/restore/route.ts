import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { restoreConfigBodySchema } from "@/lib/configs/config-fields.ts";
import { restoreConfig } from "@/lib/configs/delete-configs.ts";

// POST /v1/configs/restore — bring a deleted config back as a new version
export const POST = withAuth({ personal: true }, async (ctx, req) => ok(await restoreConfig(ctx, await parseJson(req, restoreConfigBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

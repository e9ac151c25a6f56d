import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { batchDeleteConfigsBodySchema } from "@/lib/configs/config-fields.ts";
import { batchDeleteConfigs } from "@/lib/configs/delete-configs.ts";

// POST /v1/configs/batch-delete — delete configs everywhere: { deleted, skipped }
export const POST = withAuth({ personal: true }, async (ctx, req) => ok(await batchDeleteConfigs(ctx, (await parseJson(req, batchDeleteConfigsBodySchema)).ids)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

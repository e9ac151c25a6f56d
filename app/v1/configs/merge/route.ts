import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { mergeConfigsBodySchema } from "@/lib/configs/config-fields.ts";
import { mergeConfigs } from "@/lib/configs/merge-configs.ts";

// POST /v1/configs/merge — a line-level union of two versions of a config
export const POST = withAuth({ reads: true, personal: true }, async (_ctx, req) => ok(mergeConfigs(await parseJson(req, mergeConfigsBodySchema))));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listConfigsQuerySchema, upsertConfigBodySchema } from "@/lib/configs/config-fields.ts";
import { listConfigs } from "@/lib/configs/list-configs.ts";
import { upsertConfig } from "@/lib/configs/upsert-config.ts";

// GET /v1/configs — the caller's synced agent configs (agent, scope narrow), with content
export const GET = withAuth({ personal: true }, async (ctx, req) => ok(await listConfigs(ctx, parseQuery(req, listConfigsQuerySchema))));

// PUT /v1/configs — store a new version of one config file (201 when the file is new)
export const PUT = withAuth({ personal: true }, async (ctx, req) => {
  const { config, created } = await upsertConfig(ctx, await parseJson(req, upsertConfigBodySchema));
  return ok(config, created ? 201 : 200);
});

export const { POST, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "PUT");

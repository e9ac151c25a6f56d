import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listDeletedConfigs } from "@/lib/configs/list-configs.ts";

// GET /v1/configs/deleted — deleted configs that can still be restored (paginated)
export const GET = withAuth({ personal: true }, async (ctx, req) => ok(await listDeletedConfigs(ctx, parseQuery(req, listQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

import { ok } from "@/lib/api/envelope.ts";
import { parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listQuerySchema } from "@/lib/hubs/hub-fields.ts";
import { listConfigVersions } from "@/lib/configs/list-configs.ts";

// GET /v1/configs/:id/versions — the stored versions of one config, newest first (paginated)
export const GET = withAuth<{ id: string }>({ personal: true }, async (ctx, req, params) => ok(await listConfigVersions(ctx, params.id, parseQuery(req, listQuerySchema))));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

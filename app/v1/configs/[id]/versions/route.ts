import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listConfigVersions } from "@/lib/configs/list-configs.ts";

// GET /v1/configs/:id/versions — the stored versions of one config, newest first
export const GET = withAuth<{ id: string }>({}, async (ctx, _req, params) => ok(await listConfigVersions(ctx, params.id)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");

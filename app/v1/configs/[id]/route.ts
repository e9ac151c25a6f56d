import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteConfig } from "@/lib/configs/delete-configs.ts";
import { getConfig } from "@/lib/configs/list-configs.ts";

// GET /v1/configs/:id — one config with its content
export const GET = withAuth<{ id: string }>({ personal: true }, async (ctx, _req, params) => ok(await getConfig(ctx, params.id)));

// DELETE /v1/configs/:id — delete everywhere (restorable for 30 days)
export const DELETE = withAuth<{ id: string }>({ personal: true }, async (ctx, _req, params) => ok(await deleteConfig(ctx, params.id)));

export const { POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("GET", "DELETE");

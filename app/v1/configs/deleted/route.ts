import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listDeletedConfigs } from "@/lib/configs/list-configs.ts";

// GET /v1/configs/deleted — deleted configs that can still be restored
export const GET = withAuth({}, async (ctx) => ok(await listDeletedConfigs(ctx)));

export const { POST, PUT, PATCH, DELETE } = methodsNotAllowed("GET");

import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { getHealth } from "@/lib/system/get-health.ts";

// GET /v1/health — public liveness and database check
export const GET = withPublic({ bucket: "light" }, async (ctx) => ok(await getHealth(ctx)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

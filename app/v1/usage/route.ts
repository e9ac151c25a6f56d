import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getUsage } from "@/lib/usage/get-usage.ts";

// GET /v1/usage — this month's pushes, recalls and asks, memories and storage, and the server's limits
export const GET = withAuth({}, async (ctx) => ok(await getUsage(ctx)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

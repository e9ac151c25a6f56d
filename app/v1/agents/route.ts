import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listAgents } from "@/lib/agents/list-agents.ts";

// GET /v1/agents — the caller's connected agents (from their keys, synced configs and memories) with counts
export const GET = withAuth({ personal: true }, async (ctx) => ok(await listAgents(ctx)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

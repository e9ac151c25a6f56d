import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { disconnectAgent } from "@/lib/agents/disconnect-agent.ts";
import { updateAgent, updateAgentBodySchema } from "@/lib/agents/update-agent.ts";

type Params = { slug: string };

// PATCH /v1/agents/{agent_name} — rename an agent or set its icon
export const PATCH = withAuth<Params>({ account: true, personal: true }, async (ctx, req, { slug }) => ok(await updateAgent(ctx, slug, await parseJson(req, updateAgentBodySchema))));

// DELETE /v1/agents/{agent_name} — disconnect it: revoke its keys and delete its synced configs (memories stay)
export const DELETE = withAuth<Params>({ account: true, credentials: true, personal: true }, async (ctx, _req, { slug }) => ok(await disconnectAgent(ctx, slug)));

export const { GET, POST, PUT, OPTIONS } = methodsNotAllowed("PATCH", "DELETE");

import type { AuthContext } from "@/lib/api/context.ts";
import { connectedAgents, type ConnectedAgentObject } from "./connected-agents.ts";

/** GET /v1/agents: the caller's connected agents with their counts, a plain array (at most MAX_AGENTS). */
export async function listAgents(ctx: AuthContext): Promise<ConnectedAgentObject[]> {
  return connectedAgents(ctx);
}

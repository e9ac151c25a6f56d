import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { atLeastOneOf } from "@/lib/api/at-least-one-of.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { agentId, agentLockKey, connectedAgents, MAX_ORPHAN_RENAMES, possibleAgentName, type ConnectedAgentObject } from "./connected-agents.ts";

export const updateAgentBodySchema = atLeastOneOf(
  z.object({
    // "" goes back to the name derived from agent_name.
    display_name: z.string().trim().max(100, "display_name is at most 100 characters").meta({ keepEmpty: true }).optional(),
    // An emoji or a short icon name; "" clears it.
    icon: z.string().trim().max(64, "icon is at most 64 characters").meta({ keepEmpty: true }).optional(),
  }),
  ["display_name", "icon"],
  { message: "provide display_name or icon", path: ["display_name"] },
);
export type UpdateAgentBody = z.output<typeof updateAgentBodySchema>;

/** PATCH /v1/agents/{agent_name}: rename an agent or set its icon; an agent the caller does not have is not found. */
export async function updateAgent(ctx: AuthContext, agentName: string, input: UpdateAgentBody): Promise<ConnectedAgentObject> {
  if (!possibleAgentName(agentName)) throw new ApiError("not_found", "Agent not found");
  const now = ctx.now();
  const data = { ...(input.display_name !== undefined && { displayName: input.display_name }), ...(input.icon !== undefined && { icon: input.icon }), updatedAt: now };
  await ctx.db.$transaction(async (tx) => {
    // A disconnect holds this lock while it revokes, deletes and forgets: the agent is looked up
    // after it, so a rename racing a disconnect is not found instead of writing the row back.
    await lockForTransaction(tx, agentLockKey(ctx.user.id, agentName));
    const exists = await agentExists(tx, ctx.user.id, agentName);
    if (!exists) throw new ApiError("not_found", "Agent not found");
    if (exists === "source") await pruneOrphanRenames(tx, ctx.user.id, agentName);
    // One statement (INSERT … ON CONFLICT DO UPDATE): two renames at once both land on the one row,
    // the later winning, and another agent's rename pruning this row meanwhile cannot leave the
    // update without a row to write (an insert that skipped, then an update that found nothing: 404).
    await tx.connectedAgent.upsert({
      where: { ownerId_agentName: { ownerId: ctx.user.id, agentName } },
      create: { id: agentId(ctx.user.id, agentName), ownerId: ctx.user.id, agentName, createdAt: now, ...data },
      update: data,
    });
  });
  const [agent] = await connectedAgents(ctx, agentName);
  if (!agent) throw new ApiError("not_found", "Agent not found");
  return agent;
}

/**
 * What connectedAgents lists an agent for: a key not revoked or a live synced config ("source"), or
 * only an earlier rename ("rename"); null when nothing names it.
 */
async function agentExists(tx: DbClient, ownerId: string, agentName: string): Promise<"source" | "rename" | null> {
  const [key, config, row] = await Promise.all([
    tx.apiKey.findFirst({ where: { userId: ownerId, agentName, revokedAt: null }, select: { id: true } }),
    tx.agentConfig.findFirst({ where: { ownerId, agent: agentName, deletedAt: null }, select: { id: true } }),
    tx.connectedAgent.findUnique({ where: { ownerId_agentName: { ownerId, agentName } }, select: { id: true } }),
  ]);
  return row ? "rename" : key || config ? "source" : null;
}

/**
 * Before a rename adds a row: a renamed agent whose keys and configs went (revoked, deleted) keeps
 * its row, so renaming one agent after another and deleting each left rows without limit. Such
 * orphans beyond the MAX_ORPHAN_RENAMES most recently renamed are forgotten; the rest are bounded
 * by the keys and configs an account may hold.
 */
async function pruneOrphanRenames(tx: DbClient, ownerId: string, agentName: string): Promise<void> {
  await tx.$executeRaw`
    DELETE FROM connected_agents WHERE id IN (
      SELECT ca.id FROM connected_agents ca
      WHERE ca.owner_id = ${ownerId}::uuid AND ca.agent_name <> ${agentName}
        AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.user_id = ca.owner_id AND k.agent_name = ca.agent_name AND k.revoked_at IS NULL)
        AND NOT EXISTS (SELECT 1 FROM agent_configs c WHERE c.owner_id = ca.owner_id AND c.agent = ca.agent_name AND c.deleted_at IS NULL)
      ORDER BY ca.updated_at DESC, ca.id DESC OFFSET ${MAX_ORPHAN_RENAMES})`;
}

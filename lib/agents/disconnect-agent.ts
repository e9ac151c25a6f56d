import type { AuthContext } from "@/lib/api/context.ts";
import { apiKeysLockKey } from "@/lib/auth/create-api-key.ts";
import { tombstoneConfig } from "@/lib/configs/delete-configs.ts";
import { configKeyLock } from "@/lib/configs/upsert-config.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { agentLockKey, possibleAgentName } from "./connected-agents.ts";

/** Memax's DisconnectAgentResult: always a 200, `skipped` says why nothing happened. */
export interface DisconnectAgentResult {
  disconnected: boolean;
  keys_revoked: number;
  configs_tombstoned: number;
  skipped: { id: string; reason: "not_found" }[];
}

/**
 * DELETE /v1/agents/{agent_name}: revokes every key of the caller's that names the agent, deletes its
 * synced configs (restorable, and every device is told to delete its copy, as DELETE /v1/configs
 * does) and forgets its name and icon, in one transaction. Memories stay: they are the user's.
 * An agent the caller does not have answers `disconnected: false` with a not_found skip.
 */
export async function disconnectAgent(ctx: AuthContext, agentName: string): Promise<DisconnectAgentResult> {
  const ownerId = ctx.user.id;
  const now = ctx.now();
  if (!possibleAgentName(agentName)) return { disconnected: false, keys_revoked: 0, configs_tombstoned: 0, skipped: [{ id: agentName, reason: "not_found" }] };
  const result = await ctx.db.$transaction(async (tx) => {
    // The keys lock too: a key the agent's key is making meanwhile is then among those revoked.
    await lockForTransaction(tx, [agentLockKey(ownerId, agentName), apiKeysLockKey(ownerId)]);
    const revoked = await tx.apiKey.updateMany({ where: { userId: ownerId, agentName, revokedAt: null }, data: { revokedAt: now } });
    const configs = await tx.agentConfig.findMany({ where: { ownerId, agent: agentName, deletedAt: null }, select: { id: true, agent: true, filePath: true, scope: true } });
    // Every file's key lock up front, in the order an ack takes them (sorted keys): taken one by one in
    // id order, an ack of two of these files locking in key order waited on this in a cycle.
    await lockForTransaction(tx, [...new Set(configs.map((c) => configKeyLock(ownerId, c.agent, c.filePath, c.scope)))].sort());
    let tombstoned = 0;
    for (const config of configs) if (await tombstoneConfig(tx, ownerId, config.id, now)) tombstoned += 1;
    const forgotten = await tx.connectedAgent.deleteMany({ where: { ownerId, agentName } });
    return { keys: revoked.count, configs: tombstoned, found: revoked.count + tombstoned + forgotten.count > 0 };
  });
  return {
    disconnected: result.found,
    keys_revoked: result.keys,
    configs_tombstoned: result.configs,
    skipped: result.found ? [] : [{ id: agentName, reason: "not_found" }],
  };
}

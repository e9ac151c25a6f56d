import type { AuthContext } from "@/lib/api/context.ts";
import { stableId } from "@/lib/ids.ts";

/** At most this many agents are listed: a user has at most 100 live keys, and agents are few. */
export const MAX_AGENTS = 100;
/** Renamed agents with no key or config left that are remembered (and listed); older ones are forgotten. */
export const MAX_ORPHAN_RENAMES = MAX_AGENTS;

/** Memax's ConnectedAgentWithStats. */
export interface ConnectedAgentObject {
  id: string;
  owner_id: string;
  agent_name: string;
  display_name: string;
  icon: string;
  status: "active" | "disconnected";
  created_at: string;
  updated_at: string;
  key_count: number;
  config_count: number;
  memory_count: number;
  needs_reconnect: boolean;
  last_active_at: string | null;
}

/**
 * Whether some key, config or rename could carry this name: PostgreSQL text holds no NUL, so a path
 * segment with one (DELETE /v1/agents/%00) would fail in the query as a 500 instead of not being found.
 */
export function possibleAgentName(agentName: string): boolean {
  return !agentName.includes("\0");
}

/** Serialises a rename with a disconnect of the same agent (both take it first in their transaction). */
export function agentLockKey(ownerId: string, agentName: string): string {
  return `agent:${ownerId}:${agentName}`;
}

export function agentId(ownerId: string, agentName: string): string {
  return stableId("agent", ownerId, agentName);
}

/**
 * The caller's agents (or the one named `only`): every agent_name on a key of theirs that is not
 * revoked, every agent with a live synced config, and every agent they renamed. Counts: live keys
 * (not revoked, not expired), live configs, and memories of theirs that name the agent as
 * source_agent (in hubs they are a member of; its last activity counts its writes in hubs they left as
 * well). An agent left with no live key needs reconnecting. Most recently active first.
 */
export async function connectedAgents(ctx: AuthContext, only?: string): Promise<ConnectedAgentObject[]> {
  if (only !== undefined && !possibleAgentName(only)) return [];
  const ownerId = ctx.user.id;
  const now = ctx.now();
  const [keys, configs] = await Promise.all([
    ctx.db.apiKey.findMany({
      where: { userId: ownerId, revokedAt: null, agentName: only ?? { not: null } },
      select: { agentName: true, expiresAt: true, lastUsedAt: true, createdAt: true },
    }),
    ctx.db.agentConfig.groupBy({
      by: ["agent"],
      where: { ownerId, deletedAt: null, ...(only !== undefined && { agent: only }) },
      _count: { _all: true },
      _min: { createdAt: true },
      _max: { updatedAt: true },
    }),
  ]);
  // Keys (MAX_API_KEYS_PER_USER) and configs (MAX_CONFIGS_PER_USER) are bounded, and so are the renames
  // of what they name; renames of agents nothing names any more are read at most MAX_ORPHAN_RENAMES,
  // however many an older server left behind.
  const named = [...new Set([...keys.map((key) => key.agentName!), ...configs.map((group) => group.agent)])];
  const rows =
    only !== undefined
      ? await ctx.db.connectedAgent.findMany({ where: { ownerId, agentName: only } })
      : [
          ...(named.length ? await ctx.db.connectedAgent.findMany({ where: { ownerId, agentName: { in: named } } }) : []),
          ...(await ctx.db.connectedAgent.findMany({
            where: { ownerId, agentName: { notIn: named } },
            orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
            take: MAX_ORPHAN_RENAMES,
          })),
        ];

  const agents = new Map<string, { keys: number; configs: number; first: Date; last: Date | null }>();
  const seen = (name: string, first: Date) => {
    const agent = agents.get(name) ?? { keys: 0, configs: 0, first, last: null };
    if (first < agent.first) agent.first = first;
    agents.set(name, agent);
    return agent;
  };
  const later = (a: Date | null, b: Date | null) => (a && b ? (a > b ? a : b) : (a ?? b));
  for (const key of keys) {
    const agent = seen(key.agentName!, key.createdAt);
    if (!key.expiresAt || key.expiresAt > now) agent.keys += 1;
    agent.last = later(agent.last, key.lastUsedAt);
  }
  for (const group of configs) {
    const agent = seen(group.agent, group._min.createdAt ?? now);
    agent.configs = group._count._all;
    agent.last = later(agent.last, group._max.updatedAt);
  }
  for (const row of rows) seen(row.agentName, row.createdAt);
  if (agents.size === 0) return [];

  const written = { ownerId, sourceAgent: { in: [...agents.keys()] } };
  const [counted, latest] = await Promise.all([
    ctx.db.memory.groupBy({
      by: ["sourceAgent"],
      // Only those in hubs the user is still a member of, as /v1/usage counts them: what they wrote in a
      // hub they left (or were removed from, or one marked deleted whose purge has not reached it) is out
      // of their hands and off their counter, and the two disagreed.
      where: { ...written, hub: { deletedAt: null, members: { some: { userId: ownerId } } } },
      _count: { _all: true },
    }),
    // The agent's activity, though, is every write of its own, wherever it went since: its latest push
    // into a team hub the user left since was still its latest, and the agent looked idle for days.
    ctx.db.memory.groupBy({
      by: ["sourceAgent"],
      where: { ...written, hub: { deletedAt: null } },
      _max: { createdAt: true },
    }),
  ]);
  const countBy = new Map(counted.map((m) => [m.sourceAgent!, m._count._all]));
  const latestBy = new Map(latest.map((m) => [m.sourceAgent!, m._max.createdAt]));
  const rowBy = new Map(rows.map((row) => [row.agentName, row]));

  return [...agents.entries()]
    .map(([name, agent]): ConnectedAgentObject => {
      const row = rowBy.get(name);
      const last = later(agent.last, latestBy.get(name) ?? null);
      return {
        id: agentId(ownerId, name),
        owner_id: ownerId,
        agent_name: name,
        display_name: row?.displayName || displayNameOf(name),
        icon: row?.icon ?? "",
        status: agent.keys > 0 ? "active" : "disconnected",
        created_at: agent.first.toISOString(),
        updated_at: (row && row.updatedAt > (last ?? agent.first) ? row.updatedAt : (last ?? agent.first)).toISOString(),
        key_count: agent.keys,
        config_count: agent.configs,
        memory_count: countBy.get(name) ?? 0,
        needs_reconnect: agent.keys === 0,
        last_active_at: last?.toISOString() ?? null,
      };
    })
    .sort((a, b) => (b.last_active_at ?? "").localeCompare(a.last_active_at ?? "") || a.agent_name.localeCompare(b.agent_name))
    .slice(0, MAX_AGENTS);
}

/** "claude-code" → "Claude Code": what an agent is called until its owner names it. */
function displayNameOf(agentName: string): string {
  const words = agentName
    .split(/[-_\s]+/)
    .filter(Boolean)
    .map((word) => word[0]!.toUpperCase() + word.slice(1));
  return words.length ? words.join(" ") : agentName;
}

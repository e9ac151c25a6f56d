"use client";

import { api } from "@/lib/web/api.ts";
import { formatDate, plural } from "@/lib/web/format.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { DisconnectList } from "./disconnect-list.tsx";
import { Badge } from "./ui.tsx";

interface Agent {
  id: string;
  agent_name: string;
  display_name: string;
  icon: string;
  status: "active" | "disconnected";
  key_count: number;
  config_count: number;
  memory_count: number;
  needs_reconnect: boolean;
  last_active_at: string | null;
}

/**
 * Agents named by the caller's keys and synced configs (GET /v1/agents), and a way to disconnect one.
 * The page remounts it (a new `key`) when its keys change; `onDisconnect` lets the page reload them.
 */
export function ConnectedAgents({ onDisconnect }: { onDisconnect: () => void }) {
  const agents = useApi<Agent[]>("/v1/agents");
  return (
    <DisconnectList
      title="Your agents"
      items={agents.data}
      error={agents.error}
      reload={agents.reload}
      loadingLabel="Loading agents…"
      empty={{ title: "No agents yet", body: "A key created for an agent (agent_name) or an agent syncing its configs appears here." }}
      testId="connected-agents"
      describe={(agent) => (
        <>
          <p className="flex items-center gap-2 font-medium">
            {agent.icon && <span aria-hidden>{agent.icon}</span>}
            {agent.display_name}
            <span className="font-mono text-xs text-slate-500">{agent.agent_name}</span>
            {agent.needs_reconnect && <Badge tone="amber">needs a new key</Badge>}
          </p>
          <p className="text-xs text-slate-500">
            {plural(agent.key_count, "key")} · {plural(agent.config_count, "synced config")} · {plural(agent.memory_count, "memory", "memories")} · last active{" "}
            {formatDate(agent.last_active_at)}
          </p>
        </>
      )}
      name={(agent) => agent.agent_name}
      confirmTitle={(agent) => `Disconnect “${agent.display_name}”?`}
      confirmLabel="Disconnect agent"
      confirmBody="Its keys are revoked and its synced configs deleted (restorable for 30 days). The memories it pushed stay."
      disconnect={async (agent) => {
        await api(`/v1/agents/${encodeURIComponent(agent.agent_name)}`, { method: "DELETE" });
        agents.reload();
        onDisconnect();
      }}
    />
  );
}

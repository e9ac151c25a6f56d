"use client";

import { useState } from "react";
import { api } from "@/lib/web/api.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { formatDate, plural } from "@/lib/web/format.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Badge, Button, Card, ConfirmDialog, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

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
  const [disconnecting, setDisconnecting] = useState<Agent>();
  const { busy, error, run } = useAction();

  return (
    <>
      <Card title="Your agents">
        {agents.error && !agents.data ? (
          <ErrorNotice error={agents.error} onRetry={agents.reload} />
        ) : !agents.data ? (
          <LoadingRows rows={1} height="h-14" label="Loading agents…" />
        ) : agents.data.length === 0 ? (
          <EmptyState title="No agents yet">A key created for an agent (agent_name) or an agent syncing its configs appears here.</EmptyState>
        ) : (
          <ul className="divide-y divide-slate-100" data-testid="connected-agents">
            {agents.data.map((agent) => (
              <li key={agent.id} className="flex flex-wrap items-center gap-3 py-3">
                <div className="min-w-0 flex-1">
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
                </div>
                <Button variant="ghost" onClick={() => setDisconnecting(agent)} aria-label={`Disconnect ${agent.agent_name}`}>
                  Disconnect
                </Button>
              </li>
            ))}
          </ul>
        )}
      </Card>
      <ConfirmDialog
        open={disconnecting !== undefined}
        title={`Disconnect “${disconnecting?.display_name ?? ""}”?`}
        confirmLabel="Disconnect agent"
        busy={busy}
        error={error}
        onClose={() => setDisconnecting(undefined)}
        onConfirm={() =>
          run(async () => {
            await api(`/v1/agents/${encodeURIComponent(disconnecting!.agent_name)}`, { method: "DELETE" });
            setDisconnecting(undefined);
            agents.reload();
            onDisconnect();
          })
        }
      >
        Its keys are revoked and its synced configs deleted (restorable for 30 days). The memories it pushed stay.
      </ConfirmDialog>
    </>
  );
}

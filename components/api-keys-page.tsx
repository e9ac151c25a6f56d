"use client";

import { useState } from "react";
import { api } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import type { ApiKey } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { ConnectedAgents } from "./connected-agents.tsx";
import { ConnectedApps } from "./connected-apps.tsx";
import { SignInMethods } from "./sign-in-methods.tsx";
import { Button, Card, ConfirmDialog, CopyButton, EmptyState, ErrorNotice, LoadingRows, PageHeader, Select, TextInput } from "./ui.tsx";

export function ApiKeysPage({ providers }: { providers: { id: string; name: string }[] }) {
  // A plain array: at most 100 active keys per user.
  const keys = useApi<ApiKey[]>("/v1/auth/api-keys");
  const [name, setName] = useState("");
  const [agent, setAgent] = useState("");
  // Bumped when keys change, so the agents card (counts of keys) reads again.
  const [agentsVersion, setAgentsVersion] = useState(0);
  const [expires, setExpires] = useState("");
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [created, setCreated] = useState<ApiKey & { key: string }>();
  const [revoking, setRevoking] = useState<ApiKey>();

  return (
    <>
      <PageHeader title="API keys" subtitle="Agents, scripts and the CLI authenticate with these. A key acts as you, in every hub you belong to." />
      <div className="flex flex-col gap-5">
        <Card title="Create a key">
          <form
            className="grid gap-3 sm:grid-cols-[1fr_10rem_10rem_auto] sm:items-end"
            onSubmit={async (event) => {
              event.preventDefault();
              setBusy("create");
              setError(undefined);
              try {
                const key = await api<ApiKey & { key: string }>("/v1/auth/api-keys", {
                  method: "POST",
                  body: { name: name.trim(), ...(agent.trim() && { agent_name: agent.trim() }), ...(expires && { expires_in_days: Number(expires) }) },
                });
                setCreated(key);
                setName("");
                setAgent("");
                keys.reload();
                setAgentsVersion((v) => v + 1);
              } catch (caught) {
                setError(caught);
              } finally {
                setBusy(undefined);
              }
            }}
          >
            <TextInput label="Name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. laptop CLI" />
            <TextInput label="Agent (optional)" maxLength={100} value={agent} onChange={(e) => setAgent(e.target.value)} placeholder="e.g. claude-code" />
            <Select label="Expires" value={expires} onChange={(e) => setExpires(e.target.value)}>
              <option value="">Never</option>
              <option value="7">in 7 days</option>
              <option value="30">in 30 days</option>
              <option value="90">in 90 days</option>
              <option value="365">in a year</option>
            </Select>
            <Button type="submit" variant="primary" busy={busy === "create"}>
              Create key
            </Button>
          </form>
          <div className="mt-3">
            <ErrorNotice error={error} />
          </div>
          {created && (
            <div role="status" className="mt-3 rounded-md border border-amber-300 bg-amber-50 p-3">
              <p className="text-sm font-medium text-amber-900">Copy “{created.name}” now — it will not be shown again.</p>
              <div className="mt-2 flex flex-wrap items-center gap-2">
                <label htmlFor="new-key" className="sr-only">
                  New API key
                </label>
                <input
                  id="new-key"
                  readOnly
                  value={created.key}
                  onFocus={(e) => e.target.select()}
                  data-testid="new-api-key"
                  className="min-w-0 flex-1 rounded-md border border-amber-300 bg-white px-2 py-1.5 font-mono text-xs"
                />
                <CopyButton value={created.key} />
                <Button variant="ghost" onClick={() => setCreated(undefined)}>
                  Done
                </Button>
              </div>
            </div>
          )}
        </Card>
        <Card title="Your keys">
          {keys.error && !keys.data ? (
            <ErrorNotice error={keys.error} onRetry={keys.reload} />
          ) : !keys.data ? (
            <LoadingRows rows={2} height="h-14" label="Loading keys…" />
          ) : keys.data.length === 0 ? (
            <EmptyState title="No API keys">Create one above to connect an agent.</EmptyState>
          ) : (
            <ul className="divide-y divide-slate-100">
              {keys.data.map((key) => (
                <li key={key.id} className="flex flex-wrap items-center gap-3 py-3">
                  <div className="min-w-0 flex-1">
                    <p className="font-medium">
                      {key.name}
                      {!key.scopes.includes("write") && <span className="ml-2 rounded bg-slate-100 px-1.5 py-0.5 text-xs text-slate-600">read-only</span>}
                      {key.hub_scope_mode === "hub_allowlist" && (
                        <span className="ml-2 rounded bg-sky-50 px-1.5 py-0.5 text-xs text-sky-700">hubs: {key.scope || "none left"}</span>
                      )}
                      {key.agent_name && <span className="ml-2 rounded bg-violet-50 px-1.5 py-0.5 text-xs text-violet-700">agent: {key.agent_name}</span>}
                    </p>
                    <p className="text-xs text-slate-500">
                      <span className="font-mono">{key.prefix}…</span> · created {formatDate(key.created_at)} · last used {formatDate(key.last_used_at)} ·{" "}
                      {key.expires_at ? `expires ${formatDate(key.expires_at)}` : "never expires"}
                    </p>
                  </div>
                  <Button variant="ghost" onClick={() => setRevoking(key)} aria-label={`Revoke ${key.name}`}>
                    Revoke
                  </Button>
                </li>
              ))}
            </ul>
          )}
        </Card>
        <ConnectedAgents key={agentsVersion} onDisconnect={keys.reload} />
        <ConnectedApps />
        <SignInMethods providers={providers} />
      </div>
      <ConfirmDialog
        open={revoking !== undefined}
        title={`Revoke “${revoking?.name ?? ""}”?`}
        confirmLabel="Revoke key"
        busy={busy === "revoke"}
        error={error}
        onClose={() => setRevoking(undefined)}
        onConfirm={async () => {
          setBusy("revoke");
          setError(undefined);
          try {
            await api(`/v1/auth/api-keys/${revoking!.id}`, { method: "DELETE" });
            setRevoking(undefined);
            keys.reload();
            setAgentsVersion((v) => v + 1);
          } catch (caught) {
            setError(caught);
          } finally {
            setBusy(undefined);
          }
        }}
      >
        Anything using this key stops working on its next request.
      </ConfirmDialog>
    </>
  );
}

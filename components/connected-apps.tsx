"use client";

import { useState } from "react";
import { api } from "@/lib/web/api.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { formatDate } from "@/lib/web/format.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Badge, Button, Card, ConfirmDialog, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

interface Grant {
  id: string;
  client_id: string;
  client_name: string;
  client_uri: string | null;
  hub_ids: string[] | null;
  all_hubs: boolean;
  scopes: string[];
  resource: string;
  created_at: string;
  last_used_at: string | null;
}

/** Apps signed in through OAuth (MCP clients): what each reaches, and a way to disconnect it. */
export function ConnectedApps() {
  const grants = useApi<{ grants: Grant[] }>("/v1/auth/oauth-grants");
  const [revoking, setRevoking] = useState<Grant>();
  const { busy, error, run } = useAction();

  return (
    <>
      <Card title="Connected apps">
        {grants.error && !grants.data ? (
          <ErrorNotice error={grants.error} onRetry={grants.reload} />
        ) : !grants.data ? (
          <LoadingRows rows={1} height="h-14" label="Loading connected apps…" />
        ) : grants.data.grants.length === 0 ? (
          <EmptyState title="No connected apps">MCP clients you sign in to Engram (Claude, Cursor, ChatGPT…) appear here.</EmptyState>
        ) : (
          <ul className="divide-y divide-slate-100" data-testid="connected-apps">
            {grants.data.grants.map((grant) => (
              <li key={grant.id} className="flex flex-wrap items-center gap-3 py-3">
                <div className="min-w-0 flex-1">
                  <p className="flex items-center gap-2 font-medium">
                    {grant.client_name}
                    <Badge tone={grant.scopes.includes("write") ? "amber" : "slate"}>{grant.scopes.includes("write") ? "read & write" : "read only"}</Badge>
                  </p>
                  <p className="text-xs text-slate-500">
                    {grant.all_hubs ? "all hubs" : `${grant.hub_ids?.length ?? 0} hub${grant.hub_ids?.length === 1 ? "" : "s"}`} · {grant.resource} · connected{" "}
                    {formatDate(grant.created_at)} · last used {formatDate(grant.last_used_at)}
                  </p>
                </div>
                <Button variant="ghost" onClick={() => setRevoking(grant)} aria-label={`Disconnect ${grant.client_name}`}>
                  Disconnect
                </Button>
              </li>
            ))}
          </ul>
        )}
      </Card>
      <ConfirmDialog
        open={revoking !== undefined}
        title={`Disconnect “${revoking?.client_name ?? ""}”?`}
        confirmLabel="Disconnect"
        busy={busy}
        error={error}
        onClose={() => setRevoking(undefined)}
        onConfirm={() =>
          run(async () => {
            await api(`/v1/auth/oauth-grants/${revoking!.id}`, { method: "DELETE" });
            setRevoking(undefined);
            grants.reload();
          })
        }
      >
        Its access and refresh tokens stop working on its next request; it has to sign in again.
      </ConfirmDialog>
    </>
  );
}

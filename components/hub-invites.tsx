"use client";

import { useState } from "react";
import { api, apiPath } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import type { Invite } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { Badge, Button, Card, CopyButton, EmptyState, ErrorNotice, LoadingRows, Select, TextInput } from "./ui.tsx";

/** The join link of a fresh or regenerated invite, on this dashboard's own address. */
function joinLink(invite: Invite): string | undefined {
  if (invite.token) return `${window.location.origin}/invite/${invite.token}`;
  return invite.invite_url || undefined;
}

/** `onChange`: an invite was created, regenerated, resent or revoked (the mail outbox may have grown). */
export function HubInvites({ hubId, canInviteAdmins, onChange }: { hubId: string; canInviteAdmins: boolean; onChange?: () => void }) {
  // One array: a hub has at most 20 active invites.
  const invites = useApi<Invite[]>(apiPath`/v1/hubs/${hubId}/invites`);
  const [role, setRole] = useState("contributor");
  const [email, setEmail] = useState("");
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  // Tokens are shown only when issued; keep the latest link per invite for copying.
  const [links, setLinks] = useState<Record<string, string>>({});

  async function act(key: string, run: () => Promise<Invite | unknown>) {
    setBusy(key);
    setError(undefined);
    try {
      const result = await run();
      const invite = result as Invite | undefined;
      const link = invite && typeof invite === "object" && "id" in invite ? joinLink(invite) : undefined;
      if (invite && link) setLinks((current) => ({ ...current, [invite.id]: link }));
      invites.reload();
      onChange?.();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(undefined);
    }
  }

  return (
    <Card title="Invites">
      <form
        className="grid gap-3 sm:grid-cols-[10rem_1fr_auto] sm:items-end"
        onSubmit={(event) => {
          event.preventDefault();
          act("create", () => api<Invite>(apiPath`/v1/hubs/${hubId}/invites`, { method: "POST", body: { role, ...(email.trim() && { email: email.trim() }) } })).then(() =>
            setEmail(""),
          );
        }}
      >
        <Select label="Role" value={role} onChange={(e) => setRole(e.target.value)}>
          {canInviteAdmins && <option value="admin">admin</option>}
          <option value="contributor">contributor</option>
          <option value="viewer">viewer</option>
        </Select>
        <TextInput label="Email (optional)" type="email" value={email} onChange={(e) => setEmail(e.target.value)} placeholder="Send the link by e-mail" />
        <Button type="submit" variant="primary" busy={busy === "create"}>
          Create invite
        </Button>
      </form>
      <div className="mt-3">
        <ErrorNotice error={error} />
      </div>
      <div className="mt-4">
        {invites.error && !invites.data ? (
          <ErrorNotice error={invites.error} onRetry={invites.reload} />
        ) : !invites.data ? (
          <LoadingRows rows={2} height="h-14" label="Loading invites…" />
        ) : invites.data.length === 0 ? (
          <EmptyState title="No active invites">Create one to get a join link.</EmptyState>
        ) : (
          <ul className="divide-y divide-slate-100">
            {invites.data.map((invite) => (
              <li key={invite.id} className="flex flex-col gap-2 py-3">
                <div className="flex flex-wrap items-center gap-2">
                  <Badge tone="indigo">{invite.role}</Badge>
                  <span className="text-sm text-slate-700">{invite.email ?? "Anyone with the link"}</span>
                  <span className="text-xs text-slate-500">expires {formatDate(invite.expires_at)}</span>
                  {invite.state !== "active" && <Badge tone="red">{invite.state}</Badge>}
                  <div className="ml-auto flex flex-wrap gap-2">
                    <Button busy={busy === `regen-${invite.id}`} onClick={() => act(`regen-${invite.id}`, () => api<Invite>(apiPath`/v1/hubs/${hubId}/invites/${invite.id}/regenerate`, { method: "POST" }))}>
                      Regenerate link
                    </Button>
                    <Button
                      variant="ghost"
                      busy={busy === `revoke-${invite.id}`}
                      onClick={() => act(`revoke-${invite.id}`, () => api(apiPath`/v1/hubs/${hubId}/invites/${invite.id}`, { method: "DELETE" }))}
                    >
                      Revoke
                    </Button>
                  </div>
                </div>
                {links[invite.id] ? (
                  <div className="flex flex-wrap items-center gap-2">
                    <label htmlFor={`link-${invite.id}`} className="sr-only">
                      Invite link
                    </label>
                    <input
                      id={`link-${invite.id}`}
                      readOnly
                      value={links[invite.id]}
                      onFocus={(e) => e.target.select()}
                      data-testid="invite-link"
                      className="min-w-0 flex-1 rounded-md border border-slate-300 bg-slate-50 px-2 py-1.5 font-mono text-xs"
                    />
                    <CopyButton value={links[invite.id]!} label="Copy link" />
                  </div>
                ) : (
                  <p className="text-xs text-slate-500">The link is shown only when created; regenerate to get a new one (the old link stops working).</p>
                )}
              </li>
            ))}
          </ul>
        )}
      </div>
    </Card>
  );
}

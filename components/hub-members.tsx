"use client";

import { useRouter } from "next/navigation";
import { useState } from "react";
import { useAction } from "@/lib/web/use-action.ts";
import { api, apiPath } from "@/lib/web/api.ts";
import { formatDate } from "@/lib/web/format.ts";
import { roleCan, type Member, type Page, type Role, type Transfer } from "@/lib/web/types.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { useLiveEvents } from "@/lib/web/live-events.tsx";
import { useMe } from "./app-shell.tsx";
import { useHub } from "./hub-frame.tsx";
import { HubInvites } from "./hub-invites.tsx";
import { HubMail } from "./hub-mail.tsx";
import { Button, Card, ConfirmDialog, EmptyState, ErrorNotice, LoadingRows, RoleBadge } from "./ui.tsx";

type MemberPage = Page & { members: Member[] };

export function HubMembers() {
  const me = useMe();
  const router = useRouter();
  const hub = useHub();
  const [cursor, setCursor] = useState("");
  const members = useApi<MemberPage>(apiPath`/v1/hubs/${hub.hubId}/members` + `?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  const [removing, setRemoving] = useState<Member>();
  const [leaving, setLeaving] = useState(false);
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  // The outbox reloads after an invite action, which is what may have sent mail.
  const [mailVersion, setMailVersion] = useState(0);
  const role = hub.data?.role;
  const personal = hub.data?.hub.hub_type === "personal";

  const refresh = () => {
    members.reload();
    hub.reload();
  };
  // Joins, role changes, removals and transfers by anyone show up without a reload.
  useLiveEvents(["member.*", "invite.accepted", "transfer.*", "hub.updated"], refresh, { hubId: hub.hubId });

  async function act(key: string, run: () => Promise<unknown>, after?: () => void) {
    setBusy(key);
    setError(undefined);
    try {
      await run();
      after?.();
      refresh();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(undefined);
    }
  }

  /** Owners manage everyone; admins manage contributors and viewers (decisions.md). */
  const canManage = (member: Member) =>
    member.user_id !== me.id && member.role !== "owner" && (role === "owner" || (role === "admin" && member.role !== "admin"));
  const assignable: Role[] = role === "owner" ? ["admin", "contributor", "viewer"] : ["contributor", "viewer"];

  return (
    <div className="flex flex-col gap-5">
      {hub.data?.pending_transfer && <PendingTransfer transfer={hub.data.pending_transfer} members={members.data?.members ?? hub.data.members} onChange={refresh} />}
      <Card
        title="Members"
        actions={
          role && role !== "owner" && !personal ? (
            <Button variant="danger" onClick={() => setLeaving(true)}>
              Leave hub
            </Button>
          ) : undefined
        }
      >
        <ErrorNotice error={error} />
        {members.error && !members.data ? (
          <ErrorNotice error={members.error} onRetry={members.reload} />
        ) : !members.data ? (
          <LoadingRows rows={3} height="h-14" label="Loading members…" />
        ) : members.data.members.length === 0 ? (
          <EmptyState title="No members" />
        ) : (
          <ul className="divide-y divide-slate-100">
            {members.data.members.map((member) => (
              <li key={member.user_id} className="flex flex-wrap items-center gap-3 py-3">
                <div className="min-w-0 flex-1">
                  <p className="truncate font-medium">
                    {member.name}
                    {member.user_id === me.id && <span className="ml-1 text-sm font-normal text-slate-500">(you)</span>}
                  </p>
                  <p className="truncate text-sm text-slate-500">{member.email}</p>
                </div>
                {canManage(member) && roleCan(role, "manage") ? (
                  <>
                    <label className="sr-only" htmlFor={`role-${member.user_id}`}>
                      Role of {member.name}
                    </label>
                    <select
                      id={`role-${member.user_id}`}
                      value={member.role}
                      disabled={busy !== undefined}
                      onChange={(e) =>
                        act(`role-${member.user_id}`, () =>
                          api(apiPath`/v1/hubs/${hub.hubId}/members/${member.user_id}`, { method: "PATCH", body: { role: e.target.value } }),
                        )
                      }
                      className="rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
                    >
                      {[...new Set<Role>([member.role, ...assignable])].map((r) => (
                        <option key={r} value={r}>
                          {r}
                        </option>
                      ))}
                    </select>
                    <Button variant="ghost" onClick={() => setRemoving(member)} aria-label={`Remove ${member.name}`}>
                      Remove
                    </Button>
                  </>
                ) : (
                  <RoleBadge role={member.role} />
                )}
              </li>
            ))}
          </ul>
        )}
        {(cursor || members.data?.has_more) && (
          <div className="mt-3 flex justify-between">
            <Button disabled={!cursor} onClick={() => setCursor("")}>
              First page
            </Button>
            <Button disabled={!members.data?.has_more} onClick={() => setCursor(members.data!.next_cursor)}>
              More members →
            </Button>
          </div>
        )}
      </Card>

      {role === "owner" && !personal && !hub.data?.pending_transfer && (
        <StartTransfer members={(members.data?.members ?? []).filter((m) => m.user_id !== me.id)} onStarted={refresh} />
      )}
      {roleCan(role, "manage") && !personal && (
        <>
          <HubInvites hubId={hub.hubId} canInviteAdmins={role === "owner"} onChange={() => setMailVersion((v) => v + 1)} />
          <HubMail hubId={hub.hubId} version={mailVersion} />
        </>
      )}
      {personal && <p className="text-sm text-slate-500">A personal hub has only you as a member; create a team hub to share memories.</p>}

      <ConfirmDialog
        open={removing !== undefined}
        title={`Remove ${removing?.name ?? "member"}?`}
        confirmLabel="Remove member"
        busy={busy === "remove"}
        error={error}
        onClose={() => setRemoving(undefined)}
        onConfirm={() =>
          act("remove", () => api(apiPath`/v1/hubs/${hub.hubId}/members/${removing!.user_id}`, { method: "DELETE" }), () => setRemoving(undefined))
        }
      >
        They lose access to this hub’s memories. Memories they pushed stay in the hub.
      </ConfirmDialog>
      <ConfirmDialog
        open={leaving}
        title="Leave this hub?"
        confirmLabel="Leave hub"
        busy={busy === "leave"}
        error={error}
        onClose={() => setLeaving(false)}
        onConfirm={() =>
          act("leave", () => api(apiPath`/v1/hubs/${hub.hubId}/leave`, { method: "POST" }), () => {
            setLeaving(false);
            router.push("/hubs");
          })
        }
      >
        You will need a new invite to come back.
      </ConfirmDialog>
    </div>
  );
}

function StartTransfer({ members, onStarted }: { members: Member[]; onStarted: () => void }) {
  const hub = useHub();
  const [target, setTarget] = useState("");
  const { busy, error, run } = useAction();
  return (
    <Card title="Transfer ownership">
      {members.length === 0 ? (
        <p className="text-sm text-slate-500">Invite someone first: ownership can only go to an existing member.</p>
      ) : (
        <form
          className="flex flex-col gap-3 sm:flex-row sm:items-end"
          onSubmit={async (event) => {
            event.preventDefault();
            await run(async () => {
              await api(apiPath`/v1/hubs/${hub.hubId}/ownership-transfer`, { method: "POST", body: { target_user_id: target } });
              onStarted();
            });
          }}
        >
          <label className="flex flex-1 flex-col gap-1 text-sm font-medium text-slate-700">
            New owner
            <select required value={target} onChange={(e) => setTarget(e.target.value)} className="rounded-md border border-slate-300 bg-white px-3 py-2 text-sm font-normal">
              <option value="">Choose a member…</option>
              {members.map((member) => (
                <option key={member.user_id} value={member.user_id}>
                  {member.name} ({member.email})
                </option>
              ))}
            </select>
          </label>
          <Button type="submit" busy={busy} disabled={!target}>
            Start transfer
          </Button>
        </form>
      )}
      <p className="mt-2 text-xs text-slate-500">The new owner must accept within 7 days; you become an admin.</p>
      <div className="mt-2">
        <ErrorNotice error={error} />
      </div>
    </Card>
  );
}

function PendingTransfer({ transfer, members, onChange }: { transfer: Transfer; members: Member[]; onChange: () => void }) {
  const me = useMe();
  const hub = useHub();
  const [busy, setBusy] = useState<string>();
  const [error, setError] = useState<unknown>();
  const nameOf = (id: string) => members.find((m) => m.user_id === id)?.name ?? "a member";
  const isTarget = transfer.target_user_id === me.id;
  const isOwner = transfer.from_user_id === me.id;
  const run = async (action: "accept" | "cancel") => {
    setBusy(action);
    setError(undefined);
    try {
      await api(apiPath`/v1/hubs/${hub.hubId}/ownership-transfer/${transfer.id}/${action}`, { method: "POST" });
      onChange();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(undefined);
    }
  };
  return (
    <section aria-labelledby="transfer-heading" className="rounded-lg border border-amber-300 bg-amber-50 p-4">
      <h2 id="transfer-heading" className="font-semibold text-amber-900">
        Ownership transfer pending
      </h2>
      <p className="mt-1 text-sm text-amber-900">
        {isTarget ? "You have been offered ownership of this hub" : `${nameOf(transfer.from_user_id)} offered ownership to ${nameOf(transfer.target_user_id)}`}
        {" · "}expires {formatDate(transfer.expires_at)}
      </p>
      <div className="mt-3 flex flex-wrap gap-2">
        {isTarget && (
          <Button variant="primary" busy={busy === "accept"} onClick={() => run("accept")}>
            Accept ownership
          </Button>
        )}
        {(isTarget || isOwner) && (
          <Button busy={busy === "cancel"} onClick={() => run("cancel")}>
            {isTarget ? "Decline" : "Cancel transfer"}
          </Button>
        )}
      </div>
      <div className="mt-2">
        <ErrorNotice error={error} />
      </div>
    </section>
  );
}

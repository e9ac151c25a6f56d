"use client";

import Link from "next/link";
import { useEffect, useRef, useState } from "react";
import { whenIdle } from "@/lib/web/when-idle.ts";
import { api, errorMessage } from "@/lib/web/api.ts";
import { formatAge } from "@/lib/web/format.ts";
import { useLiveEvents } from "@/lib/web/live-events.tsx";
import { GateChoices } from "./gate-choices.tsx";
import { Button, Spinner } from "./ui.tsx";

interface Person {
  display?: string;
}

interface Payload {
  hub?: { name?: string };
  inviter?: Person;
  member?: Person;
  initiator?: Person;
  new_owner?: Person;
  role?: string;
  memory?: { title?: string };
  error?: string;
  gate?: { question?: string; context?: string; source_agent?: string; options?: { id: string; label: string }[] };
  // A checklist (the getting-started one): its steps.
  title?: string;
  description?: string;
  items?: ChecklistItem[];
}

interface ChecklistItem {
  id: string;
  title: string;
  description?: string;
  cta_url?: string;
  cta_label?: string;
  completed_at?: string;
  locked_by?: string[];
  progress?: { current: number; target: number };
}

interface NotificationRow {
  id: string;
  kind: string;
  status: string;
  hub_id?: string;
  payload: Payload;
  created_at: string;
  seen_at?: string;
}

interface Summary {
  unseen_total: number;
  needs_action_pending: number;
  updates_pending: number;
}

const DECISIONS = new Set(["hub_invite", "hub_ownership_transfer"]);

function describe(n: NotificationRow): string {
  const hub = n.payload.hub?.name ? `“${n.payload.hub.name}”` : "a hub";
  switch (n.kind) {
    case "hub_invite":
      return `${n.payload.inviter?.display || "Someone"} invited you to ${hub} as ${n.payload.role}`;
    case "hub_member_joined":
      return `${n.payload.member?.display || "Someone"} joined ${hub}`;
    case "hub_ownership_transfer":
      return `${n.payload.initiator?.display || "The owner"} offers you ownership of ${hub}`;
    case "hub_ownership_transferred":
      return `${n.payload.new_owner?.display || "Someone"} now owns ${hub}`;
    case "checklist":
      return n.payload.title ?? "Checklist";
    case "decision_gate":
      return `${n.payload.gate?.source_agent || "An agent"} asks in ${hub}: ${n.payload.gate?.question ?? ""}`;
    case "memory_processing_failed":
      return `Processing failed for “${n.payload.memory?.title ?? "a memory"}”: ${n.payload.error ?? "unknown error"}`;
    default:
      return n.kind.replaceAll("_", " ");
  }
}

/** A checklist's steps: done ones ticked, the others with their link and a way to tick them off. */
function ChecklistSteps({ n, onComplete }: { n: NotificationRow; onComplete: (itemId: string) => void }) {
  const items = n.payload.items ?? [];
  const done = new Set(items.filter((i) => i.completed_at).map((i) => i.id));
  return (
    <ol className="mt-2 flex flex-col gap-1.5" aria-label={n.payload.title ?? "Checklist"}>
      {items.map((item) => {
        const locked = (item.locked_by ?? []).some((id) => !done.has(id));
        return (
          <li key={item.id} className="flex items-start gap-2 text-xs">
            <span aria-hidden className={item.completed_at ? "text-emerald-600" : "text-slate-400"}>
              {item.completed_at ? "✓" : "○"}
            </span>
            <span className="min-w-0 flex-1">
              <span className={item.completed_at ? "text-slate-500 line-through" : "text-slate-800"}>{item.title}</span>
              {item.progress && !item.completed_at && (
                <span className="ml-1 text-slate-500">
                  ({item.progress.current}/{item.progress.target})
                </span>
              )}
              {!item.completed_at && item.cta_url && (
                <Link prefetch={false} href={item.cta_url} className="ml-1 text-indigo-700 hover:underline">
                  {item.cta_label ?? "Open"}
                </Link>
              )}
            </span>
            {!item.completed_at && (
              <Button variant="ghost" disabled={locked} onClick={() => onComplete(item.id)} aria-label={`Mark “${item.title}” done`}>
                Done
              </Button>
            )}
          </li>
        );
      })}
    </ol>
  );
}

/** The header's bell: unseen count kept live by `notification.created`, a panel to act on them. */
export function NotificationBell() {
  const [summary, setSummary] = useState<Summary>();
  const [open, setOpen] = useState(false);
  const [rows, setRows] = useState<NotificationRow[]>();
  const [error, setError] = useState<string>();
  const [version, setVersion] = useState(0);
  const panel = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let current = true;
    const cancel = whenIdle(() => {
      api<Summary>("/v1/notifications/summary")
        .then((data) => current && setSummary(data))
        .catch(() => undefined);
    });
    return () => {
      current = false;
      cancel();
    };
  }, [version]);
  useEffect(() => {
    if (!open) return;
    let current = true;
    api<{ notifications: NotificationRow[] }>("/v1/notifications?limit=20")
      .then((data) => {
        if (!current) return;
        setRows(data.notifications);
        // Opening the panel shows them: mark the unseen ones seen.
        const unseen = data.notifications.filter((n) => !n.seen_at);
        if (unseen.length) void Promise.all(unseen.map((n) => api(`/v1/notifications/${n.id}/seen`, { method: "POST" }))).then(() => setVersion((v) => v + 1));
      })
      .catch((caught: unknown) => current && setError(errorMessage(caught)));
    return () => {
      current = false;
    };
  }, [open, version]);
  useLiveEvents(["notification.created", "invite.accepted", "transfer.*"], () => setVersion((v) => v + 1));

  const act = async (n: NotificationRow, path: string, body?: unknown) => {
    setError(undefined);
    try {
      await api(`/v1/notifications/${n.id}/${path}`, { method: "POST", body });
      setVersion((v) => v + 1);
    } catch (caught) {
      setError(errorMessage(caught));
    }
  };
  const startChecklist = async () => {
    setError(undefined);
    try {
      await api("/v1/onboarding/restart", { method: "POST", body: {} });
      setVersion((v) => v + 1);
    } catch (caught) {
      setError(errorMessage(caught));
    }
  };
  const unseen = summary?.unseen_total ?? 0;

  return (
    <div className="relative" ref={panel}>
      <Button variant="ghost" aria-label={`Notifications${unseen ? ` (${unseen} unseen)` : ""}`} aria-expanded={open} onClick={() => setOpen(!open)}>
        <svg aria-hidden viewBox="0 0 24 24" className="h-5 w-5" fill="none" stroke="currentColor" strokeWidth="1.8" strokeLinecap="round" strokeLinejoin="round">
          <path d="M6 8a6 6 0 1 1 12 0c0 7 3 9 3 9H3s3-2 3-9" />
          <path d="M10.3 21a1.94 1.94 0 0 0 3.4 0" />
        </svg>
        {unseen > 0 && (
          <span data-testid="notification-count" className="rounded-full bg-red-600 px-1.5 text-xs font-semibold text-white">
            {unseen}
          </span>
        )}
      </Button>
      {open && (
        <div role="dialog" aria-label="Notifications" className="absolute right-0 z-20 mt-2 w-96 max-w-[90vw] rounded-lg border border-slate-200 bg-white p-3 shadow-lg">
          {error && <p className="mb-2 text-sm text-red-700">{error}</p>}
          {!rows ? (
            <Spinner label="Loading…" />
          ) : rows.length === 0 ? (
            <p className="py-4 text-center text-sm text-slate-500">Nothing new.</p>
          ) : (
            <ul className="flex max-h-96 flex-col gap-2 overflow-y-auto">
              {rows.map((n) => (
                <li key={n.id} className="rounded-md border border-slate-100 p-2 text-sm">
                  <p className="text-slate-800">{describe(n)}</p>
                  {n.kind === "decision_gate" && n.payload.gate?.context && <p className="mt-1 text-xs text-slate-600">{n.payload.gate.context}</p>}
                  <div className="mt-1 flex items-center gap-2 text-xs text-slate-500">
                    <time dateTime={n.created_at}>{formatAge(n.created_at)}</time>
                    {n.hub_id && (
                      <Link prefetch={false} href={`/hubs/${n.hub_id}`} className="text-indigo-700 hover:underline">
                        Open hub
                      </Link>
                    )}
                    <span className="ml-auto flex gap-1">
                      {n.kind === "decision_gate" ? null : n.kind === "checklist" ? (
                        <Button variant="ghost" onClick={() => act(n, "resolve", { action: "dismiss" })}>
                          Dismiss
                        </Button>
                      ) : DECISIONS.has(n.kind) ? (
                        <>
                          <Button variant="primary" onClick={() => act(n, "resolve", { action: "accept" })}>
                            Accept
                          </Button>
                          <Button onClick={() => act(n, "resolve", { action: "decline" })}>Decline</Button>
                        </>
                      ) : (
                        <Button variant="ghost" onClick={() => act(n, "dismiss")}>
                          Dismiss
                        </Button>
                      )}
                    </span>
                  </div>
                  {n.kind === "decision_gate" && n.status === "pending" && (
                    <GateChoices options={n.payload.gate?.options ?? []} onChoose={(action) => act(n, "resolve", { action })} />
                  )}
                  {n.kind === "checklist" && <ChecklistSteps n={n} onComplete={(itemId) => act(n, `items/${encodeURIComponent(itemId)}/complete`)} />}
                </li>
              ))}
            </ul>
          )}
          {rows && !rows.some((n) => n.kind === "checklist") && (
            <div className="mt-2 border-t border-slate-100 pt-2 text-right">
              <Button variant="ghost" onClick={() => startChecklist()}>
                Getting started checklist
              </Button>
            </div>
          )}
        </div>
      )}
    </div>
  );
}

"use client";

import { useState } from "react";
import { api, ApiClientError } from "@/lib/web/api.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useHub } from "./hub-frame.tsx";
import type { Page } from "@/lib/web/types.ts";
import { Markdown } from "./markdown.tsx";
import { Badge, Button, Card, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

interface DreamRun {
  id: string;
  status: string;
  started_at: string;
  finished_at?: string;
  memories_scanned: number;
  duplicates_merged: number;
  contradictions_found: number;
  memories_archived: number;
  memories_organized: number;
  report: string;
  error: string | null;
}

interface DreamAction {
  id: string;
  action_type: "merge" | "contradiction" | "archive" | "organize";
  state: "applied" | "undone" | "pending_review" | "resolved";
  source_memory_ids: string[];
  reason: string;
  similarity: number;
  resolution: string | null;
  details: { a?: { id: string; title: string; excerpt: string }; b?: { id: string; title: string; excerpt: string }; topic_name?: string };
}

const TYPE_LABEL: Record<DreamAction["action_type"], string> = { merge: "Merged", contradiction: "Contradiction", archive: "Archived", organize: "Organized" };
/** Reviews closed because a memory was deleted or left the hub: nothing to reopen (the API answers 409). */
const CLOSED_FOR_GOOD = new Set(["memory_deleted", "memory_moved"]);
const STATUS_TONE: Record<string, "emerald" | "amber" | "red" | "slate"> = { completed: "emerald", partial_failed: "amber", failed: "red" };

/** The hub's dream runs, the selected run's report, and each action with its undo. */
export function HubDreams() {
  const { data: hub, hubId } = useHub();
  const role = hub?.role;
  const canAct = role === "owner" || role === "admin" || (role === "contributor" && hub?.hub.allow_contributor_dreams === true);
  return <DreamRuns hubId={hubId} canAct={canAct} />;
}

type RunPage = Page & { runs: DreamRun[] };

/** A hub's runs, 20 a page (a daily run makes 30 a month): older pages are read on demand. */
export function DreamRuns({ hubId, canAct }: { hubId: string; canAct: boolean }) {
  const path = `/v1/dreams?hub_id=${encodeURIComponent(hubId)}&limit=20`;
  const runs = useApi<RunPage>(path);
  const [selected, setSelected] = useState<string>();
  const trigger = useAction();
  const older = useAction();
  const showOlder = () =>
    older.run(async () => {
      const next = await api<RunPage>(`${path}&cursor=${encodeURIComponent(runs.data!.next_cursor)}`);
      runs.setData((page) => page && { ...next, runs: [...page.runs, ...next.runs.filter((r) => !page.runs.some((p) => p.id === r.id))] });
    });
  const run = runs.data?.runs.find((r) => r.id === selected) ?? runs.data?.runs[0];

  return (
    <div className="flex flex-col gap-4">
      <div className="flex flex-wrap items-center justify-between gap-2">
        <p className="text-sm text-slate-600">Dreams merge near-duplicates, flag contradictions, archive stale memories and sort unsorted ones. Everything can be undone.</p>
        {canAct && (
          <Button
            variant="primary"
            busy={trigger.busy}
            onClick={() =>
              trigger.run(async () => {
                await api("/v1/dreams/trigger", { method: "POST", hubId });
                runs.reload();
              })
            }
          >
            Dream now
          </Button>
        )}
      </div>
      {trigger.error !== undefined && <ErrorNotice error={trigger.error} />}
      {runs.error ? (
        <ErrorNotice error={runs.error} onRetry={runs.reload} />
      ) : !runs.data ? (
        <LoadingRows rows={2} label="Loading dream runs…" />
      ) : runs.data.runs.length === 0 ? (
        <EmptyState title="No dream runs yet">Runs happen daily once the hub has new memories{canAct ? ", or now with “Dream now”" : ""}.</EmptyState>
      ) : (
        <div className="grid gap-4 md:grid-cols-[16rem_1fr]">
          <nav aria-label="Dream runs" className="flex flex-col gap-1">
            {runs.data.runs.map((r) => (
              <button
                key={r.id}
                type="button"
                onClick={() => setSelected(r.id)}
                aria-current={r.id === run?.id ? "true" : undefined}
                className={`rounded-md border px-3 py-2 text-left text-sm ${r.id === run?.id ? "border-indigo-500 bg-indigo-50" : "border-slate-200 bg-white hover:bg-slate-50"}`}
              >
                <span className="block font-medium">{new Date(r.started_at).toLocaleString()}</span>
                <span className="flex items-center gap-2 text-xs text-slate-500">
                  <Badge tone={STATUS_TONE[r.status] ?? "slate"}>{r.status}</Badge>
                  {r.duplicates_merged + r.contradictions_found + r.memories_archived + r.memories_organized} actions
                </span>
              </button>
            ))}
            {runs.data.has_more && (
              <Button variant="ghost" busy={older.busy} onClick={showOlder}>
                Show older runs
              </Button>
            )}
            {older.error !== undefined && <ErrorNotice error={older.error} />}
            <Button variant="ghost" onClick={runs.reload}>
              Refresh
            </Button>
          </nav>
          {run && <RunReport key={run.id} run={run} canAct={canAct} />}
        </div>
      )}
    </div>
  );
}

type ActionPage = Page & { actions: DreamAction[] };

/**
 * A run's report and its actions. A large hub's run has thousands of actions, listed 100 a page: the
 * pages after the first are read on demand, so each can be seen and undone here.
 */
export function RunReport({ run, canAct }: { run: DreamRun; canAct: boolean }) {
  const path = `/v1/dreams/${run.id}/actions?limit=100`;
  const actions = useApi<ActionPage>(path);
  const more = useAction();
  const showMore = () =>
    more.run(async () => {
      const next = await api<ActionPage>(`${path}&cursor=${encodeURIComponent(actions.data!.next_cursor)}`);
      actions.setData((page) => page && { ...next, actions: [...page.actions, ...next.actions.filter((a) => !page.actions.some((p) => p.id === a.id))] });
    });
  return (
    <div className="flex flex-col gap-4">
      <Card title="Report">
        {run.report ? <Markdown>{run.report}</Markdown> : <p className="text-sm text-slate-500">This run is {run.status}; its report appears when it finishes.</p>}
        {run.error && <p className="mt-2 text-sm text-amber-700">{run.error}</p>}
      </Card>
      <Card title="Actions">
        {actions.error ? (
          <ErrorNotice error={actions.error} onRetry={actions.reload} />
        ) : !actions.data ? (
          <LoadingRows rows={3} label="Loading actions…" />
        ) : actions.data.actions.length === 0 ? (
          <p className="text-sm text-slate-500">This run changed nothing.</p>
        ) : (
          <ul className="flex flex-col divide-y divide-slate-100">
            {actions.data.actions.map((action) => (
              <ActionRow
                key={action.id}
                action={action}
                canAct={canAct}
                onChange={(next) => actions.setData((current) => current && { ...current, actions: current.actions.map((a) => (a.id === next.id ? next : a)) })}
              />
            ))}
          </ul>
        )}
        {actions.data?.has_more && (
          <Button variant="ghost" className="mt-2" busy={more.busy} onClick={showMore}>
            Show more actions
          </Button>
        )}
        {more.error !== undefined && <ErrorNotice error={more.error} />}
      </Card>
    </div>
  );
}

function ActionRow({ action, canAct, onChange }: { action: DreamAction; canAct: boolean; onChange: (action: DreamAction) => void }) {
  const { busy, error, run } = useAction();
  const [chosen, setChosen] = useState<"keep_a" | "keep_b">();
  const call = (path: string, body?: { resolution?: string; version?: number }) =>
    run(async () => {
      if (body?.resolution === "keep_a" || body?.resolution === "keep_b") setChosen(body.resolution);
      onChange(await api<DreamAction>(`/v1/dreams/actions/${action.id}/${path}`, { method: "POST", body }));
    });
  // The side to archive was edited after the review was flagged (409 with its current version): the
  // review shows the text as the run read it, so the person reads it as it is now and confirms.
  const edited =
    action.state === "pending_review" && chosen && error instanceof ApiClientError && error.code === "conflict" && typeof error.details?.version === "number" && typeof error.details?.memory_id === "string"
      ? { memoryId: error.details.memory_id, version: error.details.version }
      : undefined;
  return (
    <li className="flex flex-col gap-2 py-3">
      <div className="flex flex-wrap items-center gap-2">
        <Badge tone={action.action_type === "contradiction" ? "amber" : "slate"}>{TYPE_LABEL[action.action_type]}</Badge>
        {action.state === "undone" && <Badge>undone</Badge>}
        {action.state === "resolved" && <Badge tone="emerald">{action.resolution?.replace("_", " ")}</Badge>}
        <span className="text-sm text-slate-800">{action.reason}</span>
      </div>
      {action.action_type === "contradiction" && action.details.a && action.details.b && (
        <div className="grid gap-2 text-sm md:grid-cols-2">
          {(["a", "b"] as const).map((side) => (
            <a key={side} href={`/memories/${action.details[side]!.id}`} className="rounded border border-slate-200 p-2 hover:bg-slate-50">
              <span className="font-medium">{side.toUpperCase()}: {action.details[side]!.title}</span>
              <span className="block text-slate-600">{action.details[side]!.excerpt}</span>
            </a>
          ))}
        </div>
      )}
      {canAct && (
        <div className="flex flex-wrap gap-2">
          {action.state === "pending_review" ? (
            <>
              <Button busy={busy} onClick={() => call("resolve", { resolution: "keep_a" })}>Keep A</Button>
              <Button busy={busy} onClick={() => call("resolve", { resolution: "keep_b" })}>Keep B</Button>
              <Button busy={busy} onClick={() => call("resolve", { resolution: "keep_both" })}>Keep both</Button>
            </>
          ) : action.state !== "undone" && !CLOSED_FOR_GOOD.has(action.resolution ?? "") ? (
            <Button busy={busy} onClick={() => call("undo")}>
              {action.action_type === "merge" ? "Undo (split)" : action.action_type === "archive" ? "Undo (restore)" : action.action_type === "contradiction" ? "Reopen" : "Undo"}
            </Button>
          ) : null}
        </div>
      )}
      {error !== undefined && <ErrorNotice error={error} />}
      {edited && chosen && (
        <p className="flex flex-wrap items-center gap-2 text-sm text-amber-700">
          <a href={`/memories/${edited.memoryId}`} className="underline">
            Read it as it is now
          </a>
          <Button busy={busy} onClick={() => call("resolve", { resolution: chosen, version: edited.version })}>
            Archive it anyway
          </Button>
        </p>
      )}
    </li>
  );
}

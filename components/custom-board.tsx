"use client";

import { useEffect, useId, useState } from "react";
import { api } from "@/lib/web/api.ts";
import { formatAge } from "@/lib/web/format.ts";
import type { AnswerSlot, Board, SlotState, Verdict } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { BoardHistory } from "./board-history.tsx";
import { CitedText } from "./cited-text.tsx";
import { FeedbackTally } from "./feedback-tally.tsx";
import { SourceList, citedSource } from "./source-list.tsx";
import { Badge, Button, ConfirmDialog, ErrorNotice, LoadingRows, Spinner, TextArea, TextInput } from "./ui.tsx";

/** How often a cooking board is read again: its first answer usually lands within a second or two. */
const COOKING_POLL_MS = 1500;

const CARD_STATE: Record<SlotState, { label: string; tone: "indigo" | "slate" | "emerald" }> = {
  fresh: { label: "new", tone: "indigo" },
  seen: { label: "seen", tone: "slate" },
  resolved: { label: "acknowledged", tone: "emerald" },
  dismissed: { label: "dismissed", tone: "slate" },
};

interface Props {
  hubId: string;
  board: Board;
  /** May acknowledge, dismiss, reopen and judge the card (anyone who may push). */
  canAnswer: boolean;
  /** May edit, pause and delete (its creator or a hub manager); the API has the last word. */
  canManage: boolean;
  onDeleted: (boardId: string) => void;
}

/** A custom board: its instruction, its one card answering it, and what its people may do with both. */
export function CustomBoard({ hubId, board: listed, canAnswer, canManage, onDeleted }: Props) {
  const path = `/v1/hubs/${encodeURIComponent(hubId)}/boards/${encodeURIComponent(listed.id)}`;
  const detail = useApi<{ board: Board; slots: AnswerSlot[] }>(path);
  const board = detail.data?.board ?? listed;
  const slot = detail.data?.slots[0];
  const [editing, setEditing] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const action = useAction();
  const removal = useAction();
  const headingId = useId();

  const cooking = board.status === "cooking";
  const { loading, error: loadError, reload } = detail;
  useEffect(() => {
    if (!cooking || loading || loadError) return;
    const timer = setTimeout(reload, COOKING_POLL_MS);
    return () => clearTimeout(timer);
  }, [cooking, loading, loadError, reload]);

  const update = (body: { title?: string; instruction?: string; status?: "active" | "paused" }) =>
    action.run(async () => {
      const rewritten = body.instruction !== undefined && body.instruction !== board.instruction;
      const { board: next } = await api<{ board: Board }>(path, { method: "PATCH", body });
      // A new instruction empties the card on the server; drop the old answer here at once too.
      detail.setData((current) => ({ board: next, slots: rewritten ? [] : (current?.slots ?? []) }));
      setEditing(false);
    });
  const resolve = (resolution: "ack" | "dismiss" | "reopen" | "feedback", verdict?: Verdict) =>
    action.run(async () => {
      const { slot: next } = await api<{ slot: AnswerSlot }>(`/v1/hubs/${encodeURIComponent(hubId)}/board/slots/${encodeURIComponent(`board:${board.id}`)}/resolve`, {
        method: "POST",
        // Each action names the answer shown: one refreshed meanwhile is refused (409), not settled or judged unseen.
        body: { action: resolution, verdict, ...(slot && { content_updated_at: slot.content_updated_at }) },
      });
      detail.setData((current) => current && { ...current, slots: [next] });
    });

  return (
    <article aria-labelledby={headingId} data-testid="custom-board" className="flex flex-col gap-3 rounded-lg border border-slate-200 bg-white p-4 shadow-sm">
      <header className="flex flex-wrap items-center gap-2">
        <h3 id={headingId} className="break-words text-base font-semibold">
          {board.title}
        </h3>
        <span data-testid="board-status">
          <StatusBadge status={board.status} />
        </span>
        {canManage && !editing && (
          <span className="ml-auto flex flex-wrap gap-1">
            <Button variant="ghost" onClick={() => setEditing(true)}>
              Edit
            </Button>
            <Button variant="ghost" busy={action.busy} onClick={() => update({ status: board.status === "paused" ? "active" : "paused" })}>
              {board.status === "paused" ? "Resume" : "Pause"}
            </Button>
            <Button variant="ghost" className="text-red-700" onClick={() => setConfirming(true)}>
              Delete
            </Button>
          </span>
        )}
      </header>

      {editing ? (
        <BoardEditor board={board} busy={action.busy} onSave={update} onCancel={() => setEditing(false)} />
      ) : (
        <p className="whitespace-pre-line text-sm text-slate-600" data-testid="board-instruction">
          {board.instruction}
        </p>
      )}
      {action.error !== undefined && <ErrorNotice error={action.error} />}

      {detail.error ? (
        <ErrorNotice error={detail.error} onRetry={detail.reload} />
      ) : slot ? (
        <div className="flex flex-col gap-2 rounded-md border border-slate-100 bg-slate-50/60 p-3">
          <div className="flex flex-wrap items-center gap-2 text-xs text-slate-500">
            <span data-testid="card-state">
              <Badge tone={CARD_STATE[slot.state].tone}>{CARD_STATE[slot.state].label}</Badge>
            </span>
            <span>Answered {formatAge(slot.content_updated_at)}</span>
            <FeedbackTally feedback={slot.feedback} />
          </div>
          <CitedText testId="board-answer" text={slot.payload.answer} source={citedSource(slot.payload.citations)} />
          <SourceList citations={slot.payload.citations} />
          {canAnswer && (
            <div className="flex flex-wrap gap-1">
              {slot.state === "resolved" || slot.state === "dismissed" ? (
                <Button busy={action.busy} onClick={() => resolve("reopen")}>
                  Reopen
                </Button>
              ) : (
                <>
                  <Button variant="primary" busy={action.busy} onClick={() => resolve("ack")}>
                    Acknowledge
                  </Button>
                  <Button variant="ghost" disabled={action.busy} onClick={() => resolve("dismiss")}>
                    Dismiss
                  </Button>
                </>
              )}
              {/* A verdict counts on a settled card too, so these stay; the caller's own is pressed. */}
              <span className="ml-auto flex gap-1" role="group" aria-label="Was this answer right?">
                {(["accurate", "inaccurate"] as const).map((verdict) => (
                  <Button
                    key={verdict}
                    variant="ghost"
                    aria-pressed={slot.feedback?.my_verdict === verdict}
                    className={slot.feedback?.my_verdict === verdict ? "bg-slate-200" : undefined}
                    disabled={action.busy}
                    onClick={() => resolve("feedback", verdict)}
                  >
                    {verdict === "accurate" ? "Accurate" : "Inaccurate"}
                  </Button>
                ))}
              </span>
            </div>
          )}
          <History hubId={hubId} slot={slot} />
        </div>
      ) : !detail.data ? (
        <LoadingRows rows={1} height="h-10" label="Loading its answer…" />
      ) : cooking ? (
        <p className="text-sm text-slate-500">
          <Spinner label="Answering from the hub's memories…" />
        </p>
      ) : (
        <p className="text-sm text-slate-500">Paused before its first answer; resume it to have one written.</p>
      )}

      {confirming && (
        <ConfirmDialog
          open
          title={`Delete “${board.title}”?`}
          confirmLabel="Delete board"
          busy={removal.busy}
          error={removal.error}
          onClose={() => setConfirming(false)}
          onConfirm={() =>
            removal.run(async () => {
              await api(path, { method: "DELETE" });
              onDeleted(board.id);
            })
          }
        >
          Its card and the history of its answers go with it. The memories it cites stay.
        </ConfirmDialog>
      )}
    </article>
  );
}

function StatusBadge({ status }: { status: Board["status"] }) {
  if (status === "cooking")
    return (
      <Badge tone="amber" title="Its answer is being written">
        <Spinner />
        <span className="ml-1">cooking</span>
      </Badge>
    );
  return <Badge tone={status === "active" ? "emerald" : "slate"}>{status}</Badge>;
}

function BoardEditor({ board, busy, onSave, onCancel }: { board: Board; busy: boolean; onSave: (body: { title?: string; instruction?: string }) => void; onCancel: () => void }) {
  const [title, setTitle] = useState(board.title);
  const [instruction, setInstruction] = useState(board.instruction ?? "");
  return (
    <form
      className="flex flex-col gap-2"
      onSubmit={(event) => {
        event.preventDefault();
        // Only what changed: an unchanged instruction sent back must not look like a rewrite.
        const body = { ...(title.trim() !== board.title && { title }), ...(instruction.trim() !== board.instruction && { instruction }) };
        if (Object.keys(body).length) onSave(body);
        else onCancel();
      }}
    >
      <TextInput label="Title" value={title} maxLength={100} required onChange={(event) => setTitle(event.target.value)} />
      <TextArea label="Instruction" value={instruction} rows={3} maxLength={2000} required onChange={(event) => setInstruction(event.target.value)} hint="A new instruction clears the answers so far and writes a fresh one." />
      <div className="flex gap-2">
        <Button type="submit" variant="primary" busy={busy}>
          Save
        </Button>
        <Button onClick={onCancel}>Cancel</Button>
      </div>
    </form>
  );
}

/** Earlier answers behind a disclosure; read again whenever the card's answer changes. */
function History({ hubId, slot }: { hubId: string; slot: AnswerSlot }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="text-sm" onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary className="cursor-pointer text-xs font-medium text-slate-600 hover:text-slate-900">History</summary>
      <div className="mt-2">{open && <BoardHistory key={slot.content_updated_at} hubId={hubId} slotKey={slot.slot_key} />}</div>
    </details>
  );
}

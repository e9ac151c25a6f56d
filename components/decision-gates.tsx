"use client";

import Link from "next/link";
import { api } from "@/lib/web/api.ts";
import { formatAge } from "@/lib/web/format.ts";
import { useLiveEvents } from "@/lib/web/live-events.tsx";
import type { Board, GateSlot } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { GateChoices } from "./gate-choices.tsx";
import { Badge, Button, Card, EmptyState, ErrorNotice, LoadingRows } from "./ui.tsx";

const OPEN = new Set<GateSlot["state"]>(["fresh", "seen"]);

/** The system board: the hub's decision gates, open ones first, then the recently settled ones. */
export function DecisionGates({ hubId, canAnswer }: { hubId: string; canAnswer: boolean }) {
  const board = useApi<{ board: Board; slots: GateSlot[] }>(`/v1/hubs/${encodeURIComponent(hubId)}/board`);
  // An agent's new question arrives as a notification about this hub.
  useLiveEvents(["notification.created"], board.reload, { hubId });
  const replace = (next: GateSlot) => board.setData((current) => current && { ...current, slots: current.slots.map((s) => (s.id === next.id ? next : s)) });

  return (
    <Card title="Decision gates">
      {board.error ? (
        <ErrorNotice error={board.error} onRetry={board.reload} />
      ) : !board.data ? (
        <LoadingRows rows={1} label="Loading decision gates…" />
      ) : board.data.slots.length === 0 ? (
        <EmptyState title="No decisions asked yet">Agents ask their person to choose with Memax&apos;s memax_request_decision tool; the questions wait here.</EmptyState>
      ) : (
        <ul className="flex flex-col divide-y divide-slate-100" data-testid="decision-gates">
          {board.data.slots.map((slot) => (
            <GateRow key={slot.id} hubId={hubId} slot={slot} canAnswer={canAnswer} onChange={replace} />
          ))}
        </ul>
      )}
    </Card>
  );
}

function GateRow({ hubId, slot, canAnswer, onChange }: { hubId: string; slot: GateSlot; canAnswer: boolean; onChange: (slot: GateSlot) => void }) {
  const { busy, error, run } = useAction();
  const open = OPEN.has(slot.state);
  const resolve = (body: { action: string; choice?: string }) =>
    run(async () => {
      const { slot: next } = await api<{ slot: GateSlot }>(`/v1/hubs/${encodeURIComponent(hubId)}/board/slots/${encodeURIComponent(slot.slot_key)}/resolve`, {
        method: "POST",
        body,
      });
      onChange(next);
    });
  const memoryId = slot.cite_memory_ids[0];

  return (
    <li className="flex flex-col gap-1 py-3 text-sm">
      <div className="flex flex-wrap items-center gap-2">
        {open ? <Badge tone="amber">open</Badge> : slot.state === "resolved" ? <Badge tone="emerald">answered</Badge> : <Badge>dismissed</Badge>}
        <span className="font-medium text-slate-800">{slot.payload.question}</span>
      </div>
      {slot.payload.context && <p className="text-xs text-slate-600">{slot.payload.context}</p>}
      <p className="flex flex-wrap items-center gap-2 text-xs text-slate-500">
        <span>
          {slot.payload.source_agent || "An agent"} asked {formatAge(slot.created_at)}
        </span>
        {slot.payload.chosen && (
          <span>
            · Chosen: <strong className="text-slate-700">{slot.payload.chosen.label}</strong>
          </span>
        )}
        {memoryId && (
          <Link prefetch={false} href={`/memories/${memoryId}`} className="text-indigo-700 hover:underline">
            Decision memory
          </Link>
        )}
      </p>
      {canAnswer &&
        (open ? (
          <GateChoices options={slot.payload.options} busy={busy} onChoose={(action) => resolve(action === "dismiss" ? { action } : { action: "choose", choice: action })} />
        ) : (
          <div>
            <Button variant="ghost" busy={busy} onClick={() => resolve({ action: "reopen" })}>
              Reopen
            </Button>
          </div>
        ))}
      {error !== undefined && <ErrorNotice error={error} />}
    </li>
  );
}

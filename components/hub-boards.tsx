"use client";

import { useState } from "react";
import { api } from "@/lib/web/api.ts";
import { roleCan, type Board } from "@/lib/web/types.ts";
import { useAction } from "@/lib/web/use-action.ts";
import { useApi } from "@/lib/web/use-api.ts";
import { useMe } from "./app-shell.tsx";
import { CustomBoard } from "./custom-board.tsx";
import { DecisionGates } from "./decision-gates.tsx";
import { useHub } from "./hub-frame.tsx";
import { Button, Card, EmptyState, ErrorNotice, LoadingRows, TextArea, TextInput } from "./ui.tsx";

/** The API's cap on custom boards per hub (lib/boards/custom-board-fields.ts). */
const MAX_CUSTOM_BOARDS = 10;

/** The hub's boards: its decision gates, then its custom boards, each answering a standing instruction. */
export function HubBoards() {
  const { data: hub, hubId } = useHub();
  const me = useMe();
  const role = hub?.role;
  const canWrite = roleCan(role, "write");
  const boards = useApi<{ boards: Board[] }>(`/v1/hubs/${encodeURIComponent(hubId)}/boards`);
  const custom = boards.data?.boards.filter((b) => b.kind === "custom") ?? [];

  return (
    <div className="flex flex-col gap-4">
      <DecisionGates hubId={hubId} canAnswer={canWrite} />
      <section aria-labelledby="custom-boards-heading" className="flex flex-col gap-3">
        <div className="flex flex-wrap items-baseline justify-between gap-2">
          <h2 id="custom-boards-heading" className="text-base font-semibold">
            Custom boards
          </h2>
          <p className="text-xs text-slate-500">
            Each answers its instruction from the hub&apos;s memories, again after every dream run. {custom.length} of {MAX_CUSTOM_BOARDS}.
          </p>
        </div>
        {boards.error ? (
          <ErrorNotice error={boards.error} onRetry={boards.reload} />
        ) : !boards.data ? (
          <LoadingRows rows={2} label="Loading boards…" />
        ) : custom.length === 0 ? (
          <EmptyState title="No custom boards yet">
            {canWrite ? "Give one an instruction below, such as “What is blocking the next release?”." : "Members who may push can add one."}
          </EmptyState>
        ) : (
          custom.map((board) => (
            <CustomBoard
              key={board.id}
              hubId={hubId}
              board={board}
              canAnswer={canWrite}
              canManage={roleCan(role, "manage") || (canWrite && board.created_by === me.id)}
              onDeleted={(id) => boards.setData((current) => current && { boards: current.boards.filter((b) => b.id !== id) })}
            />
          ))
        )}
        {canWrite && boards.data && (
          <NewBoard
            hubId={hubId}
            full={custom.length >= MAX_CUSTOM_BOARDS}
            onCreated={(board) => boards.setData((current) => current && { boards: [...current.boards, board] })}
          />
        )}
      </section>
    </div>
  );
}

function NewBoard({ hubId, full, onCreated }: { hubId: string; full: boolean; onCreated: (board: Board) => void }) {
  const [title, setTitle] = useState("");
  const [instruction, setInstruction] = useState("");
  const { busy, error, run } = useAction();
  return (
    <Card title="New board">
      <form
        className="flex flex-col gap-3"
        onSubmit={(event) => {
          event.preventDefault();
          void run(async () => {
            const { board } = await api<{ board: Board }>(`/v1/hubs/${encodeURIComponent(hubId)}/boards`, { method: "POST", body: { title, instruction } });
            onCreated(board);
            setTitle("");
            setInstruction("");
          });
        }}
      >
        <TextInput label="Board title" value={title} maxLength={100} required onChange={(event) => setTitle(event.target.value)} placeholder="Release readiness" />
        <TextArea
          label="Board instruction"
          value={instruction}
          rows={3}
          maxLength={2000}
          required
          onChange={(event) => setInstruction(event.target.value)}
          placeholder="What must happen before the next release?"
          hint="Answered from this hub's memories, with citations, within a few seconds."
        />
        <ErrorNotice error={error} />
        <div>
          <Button type="submit" variant="primary" busy={busy} disabled={full} title={full ? "Delete a board to add another" : undefined}>
            Create board
          </Button>
        </div>
      </form>
    </Card>
  );
}

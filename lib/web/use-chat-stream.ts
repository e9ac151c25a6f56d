"use client";

import { useCallback, useEffect, useRef, useState } from "react";
import { ApiClientError } from "./api.ts";
import { readSse } from "./read-sse.ts";
import type { ChatMessage } from "./types.ts";

/** A save the agent waits on (approval.required). */
export interface PendingApproval {
  approval_id: string;
  tool_name: string;
  arguments: { content?: string; hub_id?: string; hub_name?: string };
  expires_at: string;
}

/** The answer being written, as its stream has told so far. */
export interface LiveTurn {
  messageId: string;
  text: string;
  /** What the agent is doing before any text ("Searching your memories…"). */
  activity?: string;
  approval?: PendingApproval;
}

const TERMINAL = new Set(["message.completed", "message.partial_failed", "message.failed", "message.canceled"]);
/** Reconnects in a row that bring no new event before the stream is given up. */
const MAX_IDLE_RECONNECTS = 3;

/** One connection to the stream, from after `lastEventId`; the API's error envelope becomes the thrown message. */
async function readStream(url: string, lastEventId: string, signal: AbortSignal, onEvent: (event: string, data: unknown, id?: string) => void) {
  const res = await fetch(url, {
    headers: { accept: "text/event-stream", ...(lastEventId && { "last-event-id": lastEventId }) },
    credentials: "same-origin",
    cache: "no-store",
    signal,
  });
  if (!res.ok || !res.body) {
    const payload = (await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | undefined;
    throw new ApiClientError(res.status, payload?.error?.code ?? "http_error", payload?.error?.message ?? `The server answered ${res.status}`);
  }
  await readSse(res.body, onEvent);
}

/** The live turn after one non-terminal event. */
function progress(turn: LiveTurn, event: string, body: Record<string, unknown>): LiveTurn {
  switch (event) {
    case "message.text":
      return { ...turn, text: turn.text + String(body.text ?? ""), activity: undefined };
    case "message.tool_call": {
      const name = (body.tool_call as { name?: string } | undefined)?.name;
      return { ...turn, activity: name === "recall" ? "Searching your memories…" : name === "push_memory" ? "Getting ready to save…" : `Running ${name}…` };
    }
    case "message.tool_result":
      return { ...turn, activity: "Writing the answer…" };
    case "approval.required":
      return { ...turn, approval: body as unknown as PendingApproval, activity: undefined };
    case "approval.decided":
      return { ...turn, approval: undefined, activity: body.status === "approved" ? "Saving…" : undefined };
    case "cancel.requested":
      return { ...turn, activity: "Stopping…" };
    default:
      return turn;
  }
}

/**
 * Follows one chat turn's stream (GET …/messages/{id}/stream) until its terminal event, which is
 * handed to `onFinished`. The server closes a connection after a while and the network can drop
 * one: it reconnects with Last-Event-ID, so no text is lost or shown twice.
 */
export function useChatStream(onFinished: (message: ChatMessage) => void) {
  const [live, setLive] = useState<LiveTurn>();
  const [error, setError] = useState<unknown>();
  const controller = useRef<AbortController | null>(null);
  const finished = useRef(onFinished);
  useEffect(() => {
    finished.current = onFinished;
  });
  useEffect(() => () => controller.current?.abort(), []);

  const follow = useCallback(async (messageId: string, url: string) => {
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    // The stream replays from the first event, so the text is rebuilt from nothing.
    setLive({ messageId, text: "" });
    setError(undefined);
    const update = (change: (turn: LiveTurn) => LiveTurn) => setLive((turn) => (turn && turn.messageId === messageId ? change(turn) : turn));
    let lastEventId = "";
    let ended = false;
    try {
      for (let idle = 0; !ended && idle < MAX_IDLE_RECONNECTS; ) {
        const before = lastEventId;
        try {
          await readStream(url, lastEventId, abort.signal, (event, data, id) => {
            if (id) lastEventId = id;
            if (event === "error") {
              // The server's stream failed (not the turn): out of the reader, shown with a retry.
              throw new Error(String((data as { message?: string }).message ?? "The stream failed on the server"));
            }
            if (TERMINAL.has(event)) {
              ended = true;
              setLive(undefined);
              finished.current((data as { message: ChatMessage }).message);
            } else {
              update((turn) => progress(turn, event, data as Record<string, unknown>));
            }
          });
        } catch (caught) {
          // fetch reports a dropped connection as a TypeError: reconnect; anything else is final.
          if (!(caught instanceof TypeError)) throw caught;
        }
        idle = lastEventId === before ? idle + 1 : 0;
        if (!ended && idle > 0) await new Promise((resolve) => setTimeout(resolve, 1000 * idle));
      }
      if (!ended) throw new Error("The answer's stream stopped before the answer finished");
    } catch (caught) {
      if ((caught as Error).name === "AbortError") return;
      abort.abort();
      setLive(undefined);
      setError(caught);
    } finally {
      if (controller.current === abort) controller.current = null;
    }
  }, []);

  return { live, error, follow };
}

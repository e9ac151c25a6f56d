"use client";

import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from "react";
import { EVENT_TYPES } from "@/lib/events/event-types.ts";
import { whenIdle } from "./when-idle.ts";

/** One delivered event (the `data:` of /v1/events/stream). */
export interface LiveEvent {
  id: string;
  type: string;
  hub_id: string | null;
  actor_id: string | null;
  entity_id: string | null;
  created_at: string;
}

type Listener = (event: LiveEvent) => void;

interface LiveEvents {
  subscribe(listener: Listener): () => void;
  connected: boolean;
}

const LiveEventsContext = createContext<LiveEvents | null>(null);

/**
 * One EventSource per tab for the whole dashboard (the session cookie authenticates it). The
 * browser reconnects by itself and sends Last-Event-ID, so the server replays what was missed.
 */
export function LiveEventsProvider({ children }: { children: ReactNode }) {
  const listeners = useRef(new Set<Listener>());
  const [connected, setConnected] = useState(false);
  const [value] = useState<LiveEvents>(() => ({
    subscribe(listener) {
      listeners.current.add(listener);
      return () => listeners.current.delete(listener);
    },
    connected: false,
  }));
  useEffect(() => {
    const connect = (): EventSource => {
      const source = new EventSource("/v1/events/stream");
      const onEvent = (message: MessageEvent<string>) => {
        let event: LiveEvent;
        try {
          event = JSON.parse(message.data) as LiveEvent;
        } catch {
          return;
        }
        for (const listener of listeners.current) listener(event);
      };
      for (const type of EVENT_TYPES) source.addEventListener(type, onEvent as EventListener);
      // Also on <html data-live>: the end-to-end tests wait for it before causing events, since a
      // stream only delivers events newer than its start.
      const mark = (live: boolean) => {
        setConnected(live);
        document.documentElement.dataset.live = live ? "connected" : "connecting";
      };
      source.addEventListener("ready", () => mark(true));
      source.onerror = () => mark(false);
      return source;
    };
    // The stream opens once the first content is up; Last-Event-ID is not needed for that gap
    // because lists load their current state themselves.
    let source: EventSource | undefined;
    const cancel = whenIdle(() => {
      source = connect();
    });
    return () => {
      cancel();
      source?.close();
    };
  }, []);
  return <LiveEventsContext.Provider value={{ ...value, connected }}>{children}</LiveEventsContext.Provider>;
}

/**
 * Calls `onEvent` for live events matching `types` (exact names or "memory.*") and, when given,
 * `hubId`. Bursts are coalesced: at most one call per `debounceMs`.
 */
export function useLiveEvents(types: string[], onEvent: (event: LiveEvent) => void, options: { hubId?: string; debounceMs?: number } = {}) {
  const live = useContext(LiveEventsContext);
  const handler = useRef(onEvent);
  useEffect(() => {
    handler.current = onEvent;
  });
  const key = types.join(",");
  const { hubId, debounceMs = 150 } = options;
  useEffect(() => {
    if (!live) return;
    const wanted = key.split(",");
    const matches = (type: string) => wanted.some((w) => (w.endsWith(".*") ? type.startsWith(w.slice(0, -1)) : w === type));
    let timer: ReturnType<typeof setTimeout> | undefined;
    let last: LiveEvent | undefined;
    const unsubscribe = live.subscribe((event) => {
      if (!matches(event.type) || (hubId && event.hub_id && event.hub_id !== hubId)) return;
      last = event;
      if (timer) return;
      timer = setTimeout(() => {
        timer = undefined;
        if (last) handler.current(last);
      }, debounceMs);
    });
    return () => {
      unsubscribe();
      if (timer) clearTimeout(timer);
    };
  }, [live, key, hubId, debounceMs]);
}

import { dispatch } from "./router.ts";

export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

export interface SseStream {
  status: number;
  headers: Headers;
  events: SseEvent[];
  /** Resolves with the first event (from the start) matching `pred`; rejects after `timeoutMs`. */
  waitFor(pred: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Events other than ready/ping. */
  payload(): SseEvent[];
  /** Drops the connection (the client going away). */
  close(): Promise<void>;
  /** Body text when the response was not a stream (an error envelope). */
  text?: string;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  /** Opened with `paused`: starts reading (until then the client reads nothing, as a stalled one). */
  resume(): void;
}

/** Opens GET /v1/events/stream through the route handler and parses the SSE wire format as it arrives. */
export function openEventStream(key: string, query = "", headers: Record<string, string> = {}, options: { paused?: boolean } = {}): Promise<SseStream> {
  return openSse(key, `/v1/events/stream${query}`, headers, options);
}

/** Opens any event-stream route (GET `path`) through the route handler. */
export async function openSse(key: string, path: string, headers: Record<string, string> = {}, options: { paused?: boolean } = {}): Promise<SseStream> {
  const res = await dispatch(new Request(`http://engram.test${path}`, { headers: { authorization: `Bearer ${key}`, accept: "text/event-stream", ...headers } }));
  return readSse(res, options);
}

/** Parses an event-stream Response (one a domain function returned, say) as it arrives. */
export async function readSse(res: Response, options: { paused?: boolean } = {}): Promise<SseStream> {
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  const stream: SseStream = {
    status: res.status,
    headers: res.headers,
    events,
    payload: () => events.filter((e) => e.event !== "ready" && e.event !== "ping"),
    waitFor(pred, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = events.find(pred);
          if (found) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(found);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; events so far: ${JSON.stringify(events)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: async () => undefined,
    ended: Promise.resolve(),
    resume: () => undefined,
  };
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream") || !res.body) {
    stream.text = await res.text();
    return stream;
  }
  const reader = res.body.getReader();
  stream.close = async () => {
    await reader.cancel().catch(() => undefined);
  };
  const started = new Promise<void>((resolve) => {
    stream.resume = resolve;
    if (!options.paused) resolve();
  });
  stream.ended = (async () => {
    await started;
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const parsed: Partial<SseEvent> = {};
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) parsed.id = line.slice(4);
          else if (line.startsWith("event: ")) parsed.event = line.slice(7);
          else if (line.startsWith("data: ")) parsed.data = JSON.parse(line.slice(6));
        }
        if (parsed.event) {
          events.push(parsed as SseEvent);
          for (const waiter of [...waiters]) waiter();
        }
      }
    }
  })().catch(() => undefined);
  return stream;
}

/** One server-sent event: `id:` (optional), `event:`, one `data:` line of JSON. */
export function formatSse(event: string, data: unknown, id?: string): string {
  return `${id ? `id: ${id}\n` : ""}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** True when the client asked for server-sent events. */
export function wantsEventStream(req: Request): boolean {
  return (req.headers.get("accept") ?? "").toLowerCase().includes("text/event-stream");
}

export interface SseWriter {
  /** Sends one event; false once the client has gone. */
  send(event: string, data: unknown, id?: string): boolean;
  /** A comment line (keeps proxies from buffering or timing out). */
  comment(text: string): boolean;
  close(): void;
  readonly closed: boolean;
  /** Aborted when the client disconnects or the stream is closed. */
  readonly signal: AbortSignal;
  /** Resolves once the client has read what is queued (or the stream ended): a long replay waits on it between pages. */
  drained(): Promise<void>;
}

/** Bytes queued for a client before a writer waits (`drained`). */
const QUEUE_HIGH_WATER_BYTES = 64 * 1024;
/**
 * Bytes queued beyond which the client is taken to have stopped reading: the stream ends instead of
 * growing in the server's memory for good (a client that resumes with Last-Event-ID loses nothing).
 */
export const MAX_QUEUED_BYTES = 1024 * 1024;

/** The last event of a stream that failed on the server (then closed, so the client reconnects). */
export const STREAM_FAILED = { code: "internal", message: "The stream failed on the server" } as const;

/**
 * A text/event-stream Response whose body `run` writes. The first bytes (a
 * comment) go out at once, so clients see the stream open before any work.
 */
export function sseResponse(run: (writer: SseWriter) => Promise<void> | void, init: { headers?: Record<string, string> } = {}): Response {
  const encoder = new TextEncoder();
  const abort = new AbortController();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let waiting: (() => void)[] = [];
  const wake = () => {
    const resolve = waiting;
    waiting = [];
    for (const r of resolve) r();
  };
  const write = (text: string) => {
    if (closed) return false;
    try {
      controller.enqueue(encoder.encode(text));
    } catch {
      finish();
      return false;
    }
    if ((controller.desiredSize ?? 0) < QUEUE_HIGH_WATER_BYTES - MAX_QUEUED_BYTES) {
      finish();
      return false;
    }
    return true;
  };
  const finish = () => {
    if (closed) return;
    closed = true;
    abort.abort();
    wake();
    try {
      controller.close();
    } catch {
      // already closed or errored by the client going away
    }
  };
  const writer: SseWriter = {
    send: (event, data, id) => write(formatSse(event, data, id)),
    comment: (text) => write(`: ${text}\n\n`),
    close: finish,
    get closed() {
      return closed;
    },
    signal: abort.signal,
    drained: () => (closed || (controller.desiredSize ?? 0) > 0 ? Promise.resolve() : new Promise<void>((resolve) => waiting.push(resolve))),
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        write(": stream open\n\n");
        queueMicrotask(() => {
          Promise.resolve()
            .then(() => run(writer))
            .catch((error: unknown) => {
              console.error("[engram] event stream failed", error);
              writer.send("error", STREAM_FAILED);
              // Ended, so the client reconnects: an open stream that will never send anything looks alive to it.
              finish();
            });
        });
      },
      pull() {
        wake();
      },
      cancel() {
        closed = true;
        abort.abort();
        wake();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: QUEUE_HIGH_WATER_BYTES }),
  );
  return new Response(stream, { status: 200, headers: sseHeaders(init.headers) });
}

function sseHeaders(extra?: Record<string, string>): Record<string, string> {
  return {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store, no-transform",
    Connection: "keep-alive",
    "X-Accel-Buffering": "no",
    ...extra,
  };
}

/**
 * What a HEAD on a stream answers once the GET's checks passed: its headers, no body. Next runs GET for
 * HEAD, and a stream opened for it took one of the user's places and followed its log for a body no one reads.
 */
export function sseHeadResponse(init: { headers?: Record<string, string> } = {}): Response {
  return new Response(null, { status: 200, headers: sseHeaders(init.headers) });
}

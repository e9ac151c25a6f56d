import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { sseHeadResponse, sseResponse, type SseWriter } from "@/lib/api/sse.ts";
import { findChatMessageOrThrow } from "./chat-access.ts";
import { waitForChatEvent } from "./chat-events.ts";
import { CHAT_LIMITS, isTerminal, TERMINAL_EVENTS } from "./chat-fields.ts";

/** Without a wake-up from this process (the turn runs in another), the log is read again this often. */
const POLL_MS = 500;
const PING_MS = 15_000;
/** One connection's longest life; the client reconnects with Last-Event-ID and loses nothing. */
const MAX_CONNECTION_MS = 15 * 60_000;
const BATCH = 200;
/** Answer streams one user may hold open at once in one server process: each reads the log every POLL_MS while its turn runs. */
export const MAX_CHAT_STREAMS_PER_USER = 20;
const openStreams = new Map<string, number>();

/** Last-Event-ID (header, or last_event_id in the query for browsers' EventSource polyfills): events after it. */
export function lastEventId(req: Request): number {
  const raw = req.headers.get("last-event-id") ?? new URL(req.url).searchParams.get("last_event_id") ?? "";
  if (raw.trim() === "") return 0;
  if (!/^\d+$/.test(raw.trim())) throw new ApiError("invalid_request", "Last-Event-ID must be the seq of an event (a whole number)");
  // Past any seq a turn can reach (a 32-bit column): nothing is left to send, not an error.
  return Math.min(Number(raw.trim()), 2_147_483_647);
}

/**
 * GET …/messages/{id}/stream: the turn's events from its log, each with `id: <seq>`, then the live
 * tail until the terminal event. Replayable for 24 hours (410 chat_replay_expired after).
 */
export async function streamChatMessage(
  ctx: AuthContext,
  sessionId: string,
  messageId: string,
  after: number,
  requestSignal?: AbortSignal,
  options: { head?: boolean } = {},
): Promise<Response> {
  const { message } = await findChatMessageOrThrow(ctx, sessionId, messageId);
  if (message.role !== "assistant") throw new ApiError("invalid_request", "Only an assistant message has a stream");
  if (ctx.now().getTime() - message.createdAt.getTime() > CHAT_LIMITS.replayMs) {
    throw new ApiError("chat_replay_expired", "This turn's stream is older than 24 hours; read the message instead");
  }
  if (options.head) return sseHeadResponse();
  // Counted from here, with no await before the stream holds its place: streams opened at once cannot all pass.
  const userId = ctx.user.id;
  const open = openStreams.get(userId) ?? 0;
  if (open >= MAX_CHAT_STREAMS_PER_USER) {
    throw new ApiError("rate_limited", `At most ${MAX_CHAT_STREAMS_PER_USER} answer streams may be open at once; close one first`, {
      limit: MAX_CHAT_STREAMS_PER_USER,
      retry_after: PING_MS / 1000,
    }, { "Retry-After": String(PING_MS / 1000) });
  }
  openStreams.set(userId, open + 1);
  const release = () => {
    const left = (openStreams.get(userId) ?? 1) - 1;
    if (left > 0) openStreams.set(userId, left);
    else openStreams.delete(userId);
  };
  return sseResponse(async (sse) => {
    try {
      await followTurn(sse);
      // Closed only when the follow ended well: one that threw is closed by sseResponse, after the
      // error event it sends (closed first, that event would be dropped and the stream end silently).
      sse.close();
    } finally {
      release();
    }
  });

  async function followTurn(sse: SseWriter) {
    const signal = requestSignal ? AbortSignal.any([requestSignal, sse.signal]) : sse.signal;
    const started = Date.now();
    let seq = after;
    let lastPing = Date.now();
    const finished = isTerminal(message.status);
    while (!signal.aborted && Date.now() - started < MAX_CONNECTION_MS) {
      const events = await ctx.db.chatEvent.findMany({ where: { messageId: message.id, seq: { gt: seq } }, orderBy: { seq: "asc" }, take: BATCH });
      for (const event of events) {
        if (!sse.send(event.type, event.data, String(event.seq))) return;
        seq = event.seq;
        if ((TERMINAL_EVENTS as readonly string[]).includes(event.type)) return;
      }
      if (events.length === BATCH) continue;
      // A turn already finished when the client connected has its whole log written: once that is
      // sent (a resume past its terminal event sends nothing), nothing more will come.
      if (finished) return;
      if (Date.now() - lastPing >= PING_MS) {
        if (!sse.comment("ping")) return;
        lastPing = Date.now();
      }
      await waitForChatEvent(message.id, POLL_MS, signal);
    }
  }
}

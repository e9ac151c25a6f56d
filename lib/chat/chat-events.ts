import { EventEmitter } from "node:events";
import type { DbClient } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";

/**
 * A turn's stream is a numbered log in the database (chat_events), so any process can replay it
 * from a Last-Event-ID. This emitter only wakes this process's streams early; the others poll.
 */
const globalForChat = globalThis as unknown as { __engramChatWake?: EventEmitter };
const wake = (globalForChat.__engramChatWake ??= new EventEmitter().setMaxListeners(0));

/**
 * Appends one event inside the caller's transaction: the message row's counter gives the number,
 * and its row lock orders writers (the worker, a cancel, an approval) on the same message.
 */
export async function appendChatEvent(tx: DbClient, messageId: string, type: string, data: Record<string, unknown>, options: { heartbeat?: boolean } = {}): Promise<number> {
  const row = await tx.chatMessage.update({
    where: { id: messageId },
    data: { eventSeq: { increment: 1 }, ...(options.heartbeat && { heartbeatAt: new Date() }) },
    select: { eventSeq: true, sessionId: true },
  });
  await tx.chatEvent.create({
    data: { messageId, seq: row.eventSeq, type, data: { seq: row.eventSeq, message_id: messageId, session_id: row.sessionId, ...data } as Prisma.InputJsonValue },
  });
  return row.eventSeq;
}

/** Call after the transaction that appended events committed. */
export function notifyChatEvent(messageId: string): void {
  wake.emit(messageId);
}

/** Calls `listener` on each of this process's events for the message until the returned function is called. */
export function onChatEvent(messageId: string, listener: () => void): () => void {
  wake.on(messageId, listener);
  return () => wake.off(messageId, listener);
}

/** Resolves on this process's next event for the message, or after `ms`. */
export function waitForChatEvent(messageId: string, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      wake.off(messageId, done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    wake.on(messageId, done);
    signal.addEventListener("abort", done, { once: true });
  });
}

import { randomUUID } from "node:crypto";
import { getDatabase, type Database } from "@/lib/db/database.ts";
import { inngestEnabled } from "@/lib/processing/processing-config.ts";
import { CHAT_LIMITS } from "./chat-fields.ts";
import { CHAT_TURN_STALE_MS, expireApproval, runChatTurn } from "./run-chat-turn.ts";

export const CHAT_TURN_EVENT = "engram/chat.turn";
/** Turns run at once in one process: each is a recall and a short answer, or a chat model's stream. */
const CONCURRENCY = 2;
/** A turn handed to no worker (a kick lost with its process) is picked up after this long. */
const LOST_KICK_MS = 15_000;
const SWEEP_EVERY_MS = 30_000;

interface RunnerState {
  queue: string[];
  active: Set<string>;
  /** Kicked while running: run once more after (it may have just paused, missing this kick's news). */
  again: Set<string>;
  waiters: (() => void)[];
  timer?: NodeJS.Timeout;
  owner: string;
}
const globalForChat = globalThis as unknown as { __engramChatTurns?: RunnerState };
const state = (globalForChat.__engramChatTurns ??= { queue: [], active: new Set(), again: new Set(), waiters: [], owner: `process-${randomUUID()}` });

/** Hands a turn to a worker: an Inngest event, or this process's runner. A lost hand-off is swept up. */
export async function kickChatTurn(messageId: string): Promise<void> {
  if (inngestEnabled()) {
    const { inngest } = await import("@/inngest/client.ts");
    await inngest.send({ name: CHAT_TURN_EVENT, data: { message_id: messageId } }).catch((error: unknown) => {
      console.error(`[engram] chat: could not send turn ${messageId} to Inngest; the sweep sends it again`, error);
    });
    return;
  }
  if (state.active.has(messageId)) state.again.add(messageId);
  else if (!state.queue.includes(messageId)) state.queue.push(messageId);
  pump();
}

function pump(): void {
  while (state.active.size < CONCURRENCY && state.queue.length > 0) {
    const id = state.queue.shift()!;
    state.active.add(id);
    void getDatabase()
      .then((database) => runChatTurn(database, id, state.owner))
      .catch((error: unknown) => console.error(`[engram] chat: turn ${id} could not run now`, error))
      .finally(() => {
        state.active.delete(id);
        if (state.again.delete(id)) state.queue.push(id);
        pump();
      });
  }
  if (state.active.size === 0 && state.queue.length === 0) for (const resolve of state.waiters.splice(0)) resolve();
}

/** Resolves when this process's runner has nothing left to do (tests). */
export function chatTurnsIdle(): Promise<void> {
  if (state.active.size === 0 && state.queue.length === 0) return Promise.resolve();
  return new Promise((resolve) => state.waiters.push(resolve));
}

/** How long a deleted chat is kept (its turn in flight, if any, is canceled meanwhile) before it is purged. */
const DELETED_KEPT_MS = 60 * 60_000;

/**
 * Turns that need a worker: approvals past their time (timed out here), turns no worker took,
 * and turns whose worker stopped. Also drops stream events past their replay time, and purges chats
 * deleted over an hour ago with nothing in flight (their messages, events and approvals go with them).
 */
export async function sweepChatTurns(database: Database, now = new Date(), staleMs = CHAT_TURN_STALE_MS, eventBatches = CHAT_EVENT_PRUNE_BATCHES): Promise<string[]> {
  const db = database.prisma;
  const expired = await db.chatApproval.findMany({ where: { status: "pending", expiresAt: { lte: now } }, take: 100 });
  // A turn whose approval timed out here goes on now: expiring it touched the turn, so the query below,
  // which waits for turns left alone a while, would leave it to the next sweep.
  const resumed: string[] = [];
  for (const approval of expired) if (await expireApproval(db, approval)) resumed.push(approval.messageId);
  const waiting = await db.chatMessage.findMany({
    where: {
      role: "assistant",
      status: { in: ["queued", "running", "canceling"] },
      approvals: { none: { status: "pending" } },
      OR: [
        { leaseOwner: null, updatedAt: { lt: new Date(now.getTime() - Math.min(staleMs, LOST_KICK_MS)) } },
        { leaseOwner: { not: null }, heartbeatAt: { lt: new Date(now.getTime() - staleMs) } },
      ],
    },
    orderBy: { createdAt: "asc" },
    take: 100,
    select: { id: true },
  });
  await pruneChatEvents(database, new Date(now.getTime() - CHAT_LIMITS.replayMs), eventBatches);
  const deleted = await db.chatSession.findMany({ where: { deletedAt: { lt: new Date(now.getTime() - DELETED_KEPT_MS) }, activeMessageId: null }, take: 100, select: { id: true } });
  if (deleted.length) await db.chatSession.deleteMany({ where: { id: { in: deleted.map((s) => s.id) }, activeMessageId: null } });
  return [...new Set([...resumed, ...waiting.map((m) => m.id)])];
}

/** Stream events deleted per statement: a sweep never holds locks on a large backlog for long. */
const CHAT_EVENT_PRUNE_BATCH = 2000;
/** Statements per sweep (every 30 s); a larger backlog goes over the next sweeps. */
const CHAT_EVENT_PRUNE_BATCHES = 10;

/** Deletes stream events created before `cutoff` in bounded batches (at most `maxBatches` statements). */
async function pruneChatEvents(database: Database, cutoff: Date, maxBatches: number): Promise<void> {
  for (let i = 0; i < maxBatches; i++) {
    const count = await database.prisma.$executeRaw`
      DELETE FROM chat_events WHERE (message_id, seq) IN (
        SELECT message_id, seq FROM chat_events WHERE created_at < ${cutoff} ORDER BY created_at LIMIT ${CHAT_EVENT_PRUNE_BATCH}
      )`;
    if (count < CHAT_EVENT_PRUNE_BATCH) break;
  }
}

/** Server start-up: a sweep now (on the embedded database every leased turn is a dead process's) and every 30 s. */
export async function startChatTurns(): Promise<void> {
  if (state.timer) return;
  const database = await getDatabase();
  const sweep = async (staleMs: number) => {
    try {
      for (const id of await sweepChatTurns(database, new Date(), staleMs)) await kickChatTurn(id);
    } catch (error) {
      console.error("[engram] chat: sweep failed", error);
    }
  };
  if (!inngestEnabled()) {
    state.timer = setInterval(() => void sweep(CHAT_TURN_STALE_MS), SWEEP_EVERY_MS);
    state.timer.unref();
  }
  if (database.kind === "pglite") {
    // The embedded database has one process (its data directory is locked): every lease found now is
    // a dead process's, free to take at once rather than after CHAT_TURN_STALE_MS.
    const leased = await database.prisma.chatMessage.findMany({ where: { leaseOwner: { not: null } }, select: { id: true } });
    if (leased.length) {
      await database.prisma.chatMessage.updateMany({ where: { id: { in: leased.map((m) => m.id) } }, data: { leaseOwner: null } });
      for (const { id } of leased) await kickChatTurn(id);
    }
  }
  await sweep(database.kind === "pglite" ? 0 : CHAT_TURN_STALE_MS);
}

export function stopChatTurns(): void {
  if (state.timer) clearInterval(state.timer);
  state.timer = undefined;
  state.queue.length = 0;
}

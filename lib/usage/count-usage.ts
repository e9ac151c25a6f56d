import type { AuthContext } from "@/lib/api/context.ts";
import type { Db } from "@/lib/db/database.ts";

export type UsageCounterName = "pushes" | "recalls" | "asks";

/** How long counts wait in memory before one write per user (keeps a write off every request). */
const FLUSH_DELAY_MS = 250;
/** Counts whose write failed are tried again this much later, up to MAX_WRITE_ATTEMPTS times (about 5 minutes). */
const RETRY_DELAY_MS = 5_000;
const MAX_WRITE_ATTEMPTS = 60;

/** First instant of the calendar month (UTC) containing `at`: the usage period. */
export function periodStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

export function periodEnd(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

interface Pending {
  db: Db;
  userId: string;
  periodStart: Date;
  counts: Record<UsageCounterName, number>;
  /** Failed writes of these counts so far. */
  attempts: number;
}

interface UsageState {
  pending: Map<string, Pending>;
  timer?: NodeJS.Timeout;
  flushing?: Promise<void>;
}
const globalForUsage = globalThis as unknown as { __engramUsage?: UsageState };
const state: UsageState = (globalForUsage.__engramUsage ??= { pending: new Map() });

/** Counts one successful call against the caller's current period; written within 250 ms, batched per user. */
export async function countUsage(ctx: AuthContext, counter: UsageCounterName): Promise<void> {
  const start = periodStart(ctx.now());
  const key = `${ctx.user.id}:${start.toISOString()}`;
  let entry = state.pending.get(key);
  if (!entry || entry.db !== ctx.db) {
    if (entry) await flushUsage();
    entry = { db: ctx.db, userId: ctx.user.id, periodStart: start, counts: { pushes: 0, recalls: 0, asks: 0 }, attempts: 0 };
    state.pending.set(key, entry);
  }
  entry.counts[counter] += 1;
  state.timer ??= setTimeout(() => void flushUsage(), FLUSH_DELAY_MS);
}

/** Writes every pending count now (GET /v1/usage and shutdown call it; a failure is logged, never thrown). */
export async function flushUsage(): Promise<void> {
  if (state.timer) clearTimeout(state.timer);
  state.timer = undefined;
  const batch = [...state.pending.values()];
  state.pending.clear();
  // Chained after the flush in flight: the caller returns once its batch and every earlier one are
  // written. Waiting for the one in flight and then taking the batch let two callers wait together, the
  // first take the counts and the second find none and return before they were written, so a GET
  // /v1/usage right after a push could read it uncounted.
  const run = (state.flushing ?? Promise.resolve()).then(() => writeCounts(batch));
  state.flushing = run;
  await run;
  if (state.flushing === run) state.flushing = undefined;
}

async function writeCounts(batch: Pending[]): Promise<void> {
  for (const entry of batch) {
    try {
      await entry.db.usageCounter.upsert({
        where: { userId_periodStart: { userId: entry.userId, periodStart: entry.periodStart } },
        create: { userId: entry.userId, periodStart: entry.periodStart, ...entry.counts },
        update: {
          pushes: { increment: entry.counts.pushes },
          recalls: { increment: entry.counts.recalls },
          asks: { increment: entry.counts.asks },
        },
      });
    } catch (error) {
      // The calls were answered: their counts wait for the next flush (a database hiccup, a restart)
      // instead of going missing from /v1/usage for good.
      const attempts = entry.attempts + 1;
      const key = `${entry.userId}:${entry.periodStart.toISOString()}`;
      const pending = state.pending.get(key);
      if (attempts >= MAX_WRITE_ATTEMPTS || (pending && pending.db !== entry.db)) {
        console.error(`[engram] usage: could not record counts of user ${entry.userId}; dropped after ${attempts} attempts`, error);
        continue;
      }
      console.error(`[engram] usage: could not record counts of user ${entry.userId}; tried again later`, error);
      if (pending) {
        for (const name of Object.keys(entry.counts) as UsageCounterName[]) pending.counts[name] += entry.counts[name];
        pending.attempts = Math.max(pending.attempts, attempts);
      } else {
        state.pending.set(key, { ...entry, attempts });
      }
      // Unref'd: a server stopping while its database is gone exits rather than waiting for the retries.
      state.timer ??= setTimeout(() => void flushUsage(), RETRY_DELAY_MS).unref();
    }
  }
}

/** This period's counts of the caller (pending ones written first): /v1/usage and /v1/auth/me answer the same. */
export async function periodCounts(ctx: AuthContext) {
  await flushUsage();
  const now = ctx.now();
  const start = periodStart(now);
  const counter = await ctx.db.usageCounter.findUnique({ where: { userId_periodStart: { userId: ctx.user.id, periodStart: start } } });
  return {
    user_id: ctx.user.id,
    period_start: start.toISOString(),
    period_end: periodEnd(now).toISOString(),
    push_count: counter?.pushes ?? 0,
    recall_count: counter?.recalls ?? 0,
    ask_count: counter?.asks ?? 0,
  };
}

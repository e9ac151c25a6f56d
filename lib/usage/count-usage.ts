import type { AuthContext } from "@/lib/api/context.ts";
import type { Db } from "@/lib/db/database.ts";

export type UsageCounterName = "pushes" | "recalls" | "asks";

/** How long counts wait in memory before one write per user (keeps a write off every request). */
const FLUSH_DELAY_MS = 250;
/**
 * Counts whose write failed are tried again every RETRY_DELAY_MS for RETRY_FOR_MS after they failed.
 * By the clock, not by attempts: every flush (a request's, GET /v1/usage's, /v1/auth/me's, a summary's)
 * used to try them and count an attempt, so under steady traffic an outage used up the 60 attempts in
 * seconds instead of about 5 minutes.
 */
const RETRY_DELAY_MS = 5_000;
const RETRY_FOR_MS = 5 * 60_000;

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
}

/** Counts of one user and period whose write failed. */
interface Retry extends Pending {
  /** RETRY_FOR_MS after the latest of these counts first failed: no count is given up sooner. */
  retryUntil: number;
  nextAttemptAt: number;
}

interface UsageState {
  pending: Map<string, Pending>;
  retries?: Map<string, Retry>;
  timer?: NodeJS.Timeout;
  retryTimer?: NodeJS.Timeout;
  flushing?: Promise<void>;
}
const globalForUsage = globalThis as unknown as { __engramUsage?: UsageState };
const state: UsageState = (globalForUsage.__engramUsage ??= { pending: new Map() });
const retries: Map<string, Retry> = (state.retries ??= new Map());

const keyOf = (entry: Pending) => `${entry.userId}:${entry.periodStart.toISOString()}`;

/** Counts one successful call against the caller's current period; written within 250 ms, batched per user. */
export async function countUsage(ctx: AuthContext, counter: UsageCounterName): Promise<void> {
  const start = periodStart(ctx.now());
  const key = `${ctx.user.id}:${start.toISOString()}`;
  let entry = state.pending.get(key);
  if (!entry || entry.db !== ctx.db) {
    if (entry) await flushUsage();
    entry = { db: ctx.db, userId: ctx.user.id, periodStart: start, counts: { pushes: 0, recalls: 0, asks: 0 } };
    state.pending.set(key, entry);
  }
  entry.counts[counter] += 1;
  state.timer ??= setTimeout(() => void flushUsage(), FLUSH_DELAY_MS);
}

/**
 * Writes every pending count now, and the failed counts that are due to be tried again (all of them
 * with `retryAll`: shutdown's last chance). GET /v1/usage and shutdown call it; a failure is logged,
 * never thrown.
 */
export async function flushUsage(options: { retryAll?: boolean } = {}): Promise<void> {
  if (state.timer) clearTimeout(state.timer);
  state.timer = undefined;
  const batch: Pending[] = [...state.pending.values()];
  state.pending.clear();
  const now = Date.now();
  const due: Retry[] = [];
  for (const [key, retry] of retries) {
    if (!options.retryAll && retry.nextAttemptAt > now) continue;
    retries.delete(key);
    due.push(retry);
  }
  // Chained after the flush in flight: the caller returns once its batch and every earlier one are
  // written. Waiting for the one in flight and then taking the batch let two callers wait together, the
  // first take the counts and the second find none and return before they were written, so a GET
  // /v1/usage right after a push could read it uncounted.
  const run = (state.flushing ?? Promise.resolve()).then(() => writeCounts([...batch, ...due]));
  state.flushing = run;
  await run;
  if (state.flushing === run) state.flushing = undefined;
  scheduleRetries();
}

async function writeCounts(batch: (Pending | Retry)[]): Promise<void> {
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
      // The calls were answered: their counts wait for a later flush (a database hiccup, a restart)
      // instead of going missing from /v1/usage for good.
      const now = Date.now();
      const retryUntil = "retryUntil" in entry ? entry.retryUntil : now + RETRY_FOR_MS;
      const key = keyOf(entry);
      const waiting = retries.get(key);
      if (now >= retryUntil || (waiting && waiting.db !== entry.db)) {
        console.error(`[engram] usage: could not record counts of user ${entry.userId}; dropped after trying for ${Math.round(RETRY_FOR_MS / 60_000)} minutes`, error);
        continue;
      }
      console.error(`[engram] usage: could not record counts of user ${entry.userId}; tried again later`, error);
      // One entry per user and period keeps an outage's retries to one write per user every 5 s; it is
      // kept as long as its newest counts are owed (fresh counts do not inherit older ones' deadline).
      if (waiting) {
        for (const name of Object.keys(entry.counts) as UsageCounterName[]) waiting.counts[name] += entry.counts[name];
        waiting.retryUntil = Math.max(waiting.retryUntil, retryUntil);
        waiting.nextAttemptAt = now + RETRY_DELAY_MS;
      } else {
        retries.set(key, { db: entry.db, userId: entry.userId, periodStart: entry.periodStart, counts: { ...entry.counts }, retryUntil, nextAttemptAt: now + RETRY_DELAY_MS });
      }
    }
  }
}

/** A flush when the earliest failed counts are due. */
function scheduleRetries(): void {
  if (state.retryTimer) clearTimeout(state.retryTimer);
  state.retryTimer = undefined;
  let next = Infinity;
  for (const retry of retries.values()) next = Math.min(next, retry.nextAttemptAt);
  if (next === Infinity) return;
  // Unref'd: a server stopping while its database is gone exits rather than waiting for the retries.
  state.retryTimer = setTimeout(() => void flushUsage(), Math.max(0, next - Date.now())).unref();
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

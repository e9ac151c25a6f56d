import { AsyncLocalStorage } from "node:async_hooks";
import { positiveIntEnv } from "@/lib/config.ts";

/**
 * Which database work is background (the processing pipeline, maintenance) and which is
 * foreground (everything a request waits for). The adapters schedule by it: on the embedded
 * database, foreground statements jump ahead of queued background ones and background gets a
 * bounded share of the one connection while requests are arriving; on PostgreSQL, background
 * work holds at most a few of the pool's connections. Marked with AsyncLocalStorage, so every
 * query made (directly or through Prisma) inside `runAsBackground` carries the mark.
 */
const globalForBackground = globalThis as unknown as { __engramBackgroundWork?: AsyncLocalStorage<true> };
// One instance per process: Next bundles route handlers and instrumentation separately.
const storage = (globalForBackground.__engramBackgroundWork ??= new AsyncLocalStorage<true>());

/** Runs `fn` (and everything it awaits) as background database work. */
export function runAsBackground<T>(fn: () => Promise<T>): Promise<T> {
  return storage.run(true, fn);
}

export function isBackgroundWork(): boolean {
  return storage.getStore() === true;
}

/**
 * ENGRAM_BACKGROUND_DB_PERCENT (default 50): the share of the embedded database's time the
 * pipeline may use while requests are arriving (it uses all of it when none are).
 */
export function backgroundSharePercent(): number {
  return Math.min(100, positiveIntEnv("ENGRAM_BACKGROUND_DB_PERCENT", 50));
}

/**
 * ENGRAM_BACKGROUND_DB_CONNECTIONS (default a quarter of the pool, at least 1): how many of a
 * PostgreSQL pool's connections background work may hold at once; the rest stay free for requests.
 */
export function backgroundConnections(poolSize: number): number {
  return Math.min(poolSize, positiveIntEnv("ENGRAM_BACKGROUND_DB_CONNECTIONS", Math.max(1, Math.floor(poolSize / 4))));
}

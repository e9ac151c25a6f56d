import { EARLIEST_INSTANT } from "@/lib/api/timestamp.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import type { Database } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { runPeriodically } from "@/lib/system/run-periodically.ts";

/** Rows deleted per statement: a prune never holds locks for long. */
const PRUNE_BATCH = 2000;
const PRUNE_EVERY_MS = 10 * 60_000;

/** How long events stay replayable: ENGRAM_EVENTS_RETENTION_HOURS, default 48 (never under 24). */
export function eventsRetentionMs(): number {
  return Math.max(24, positiveIntEnv("ENGRAM_EVENTS_RETENTION_HOURS", 48)) * 3_600_000;
}

/**
 * The oldest instant still retained at `now`. Clamped to the database's calendar: a retention long
 * enough to mean "keep them all" (100000000 hours) put it before year 1, which the database refuses,
 * so every prune and every stream's replay (each stream opens with one) failed.
 */
export function eventsRetainedSince(now: Date): Date {
  return new Date(Math.max(EARLIEST_INSTANT, now.getTime() - eventsRetentionMs()));
}

/** Deletes events past retention in bounded batches (at most `maxBatches` statements). Returns rows deleted. */
export async function pruneEvents(database: Database, now = new Date(), maxBatches = 50): Promise<number> {
  const cutoff = eventsRetainedSince(now);
  return deleteInBatches(
    (take) => database.prisma.event.findMany({ where: { createdAt: { lt: cutoff } }, select: { id: true }, take }),
    (ids) => database.prisma.event.deleteMany({ where: { id: { in: ids } } }),
    PRUNE_BATCH,
    maxBatches,
  );
}

/** Prunes old events every 10 minutes for the life of the process. */
export function startEventsPrune(database: Database): void {
  runPeriodically("events: prune", PRUNE_EVERY_MS, () => pruneEvents(database));
}

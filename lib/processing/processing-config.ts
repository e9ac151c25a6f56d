import { positiveIntEnv } from "@/lib/config.ts";

/** Background processing settings (all optional; documented in docs/processing.md). */
export interface ProcessingConfig {
  /** Memories processed at once by the embedded runner (their chunks share embedding batches). */
  concurrency: number;
  /** Attempts before a memory ends `failed`; a crash mid-job counts as an attempt. */
  maxAttempts: number;
  /**
   * With Inngest: a `running` memory whose run started no step for this long is presumed orphaned and
   * resumed, and a waiting memory's event is re-sent at most this often.
   */
  staleMs: number;
  /**
   * The embedded runner renews a running job's lease every third of this; a `running` memory whose lease
   * was not renewed for this long belongs to a dead process and is taken over (several processes, one database).
   */
  leaseMs: number;
  /** How often the sweeper looks for pending and orphaned memories. */
  sweepMs: number;
  /** First retry delay; each further retry doubles it (capped at 5 minutes). */
  retryBaseMs: number;
}

export function processingConfig(): ProcessingConfig {
  return {
    concurrency: positiveIntEnv("ENGRAM_PROCESSING_CONCURRENCY", 16),
    maxAttempts: positiveIntEnv("ENGRAM_PROCESSING_MAX_ATTEMPTS", 5),
    staleMs: positiveIntEnv("ENGRAM_PROCESSING_STALE_SECONDS", 300) * 1000,
    leaseMs: positiveIntEnv("ENGRAM_PROCESSING_LEASE_SECONDS", 30) * 1000,
    sweepMs: positiveIntEnv("ENGRAM_PROCESSING_SWEEP_SECONDS", 30) * 1000,
    retryBaseMs: positiveIntEnv("ENGRAM_PROCESSING_RETRY_BASE_MS", 2000),
  };
}

/** Delay after failed attempt n (1-based): base, 2×base, 4×base, … capped at 5 minutes, with ±20% jitter. */
export function retryDelayMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const base = Math.min(300_000, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

/** Whether background work goes through Inngest instead of the embedded in-process runner. */
export function inngestEnabled(): boolean {
  return Boolean(process.env.INNGEST_EVENT_KEY || process.env.INNGEST_DEV);
}

import type { Db } from "@/lib/db/database.ts";

interface Held {
  attempt: number;
  version: number;
  controller: AbortController;
}

/**
 * Keeps the leases of the jobs this process is running. A claimed memory is
 * `running` with `processing_started_at` = claim time; while the job runs that
 * timestamp is renewed every third of the lease, so another process (sharing
 * the PostgreSQL database) takes the memory over only when this one stopped
 * renewing — it was killed, or it hung for a whole lease.
 *
 * `processing_attempts` is the fencing token: a takeover claims the row with
 * attempts + 1, so this process's next renewal (`where attempts = ours`)
 * matches nothing, and the job is aborted at its next step instead of running
 * on beside its new owner. The version goes with it: a content change starts
 * attempts again from 0, so another process's claim of the new version can
 * carry this job's attempt number.
 */
export class JobLease {
  private readonly held = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private renewing = false;
  private stopped = false;

  constructor(
    private readonly db: () => Promise<Db>,
    private readonly leaseMs: number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Starts renewing the lease of a claimed memory; the signal aborts when the lease is lost. After
   * stop() (a claim that was on its way then) it is lost at once: renewed, the job ran on for good.
   */
  hold(id: string, attempt: number, version: number): AbortSignal {
    const controller = new AbortController();
    if (this.stopped) {
      controller.abort();
      return controller.signal;
    }
    this.held.set(id, { attempt, version, controller });
    if (!this.timer) {
      this.timer = setInterval(() => void this.renew(), Math.max(100, Math.floor(this.leaseMs / 3)));
      this.timer.unref();
    }
    return controller.signal;
  }

  release(id: string): void {
    this.held.delete(id);
    if (this.held.size === 0) this.stopTimer();
  }

  stop(): void {
    this.stopped = true;
    this.stopTimer();
    for (const { controller } of this.held.values()) controller.abort();
    this.held.clear();
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One guarded update per held job (at most the runner's concurrency, every lease / 3). */
  async renew(): Promise<void> {
    if (this.renewing || this.held.size === 0) return;
    this.renewing = true;
    try {
      const db = await this.db();
      const now = this.now();
      await Promise.all(
        [...this.held].map(async ([id, held]) => {
          const { count } = await db.memory.updateMany({
            where: { id, version: held.version, processingStatus: "running", processingAttempts: held.attempt },
            data: { processingStartedAt: now },
          });
          // Finished, retried, taken over or edited: only the last two matter, and only while we still hold it.
          if (count === 0 && this.held.get(id) === held) {
            const row = await db.memory.findUnique({ where: { id }, select: { processingAttempts: true, version: true } });
            if (!row || row.processingAttempts !== held.attempt || row.version !== held.version) held.controller.abort();
          }
        }),
      );
    } catch (error) {
      // The database is unreachable: our writes fail too, and the lease simply runs out if this lasts.
      console.error("[engram] processing: could not renew job leases", error);
    } finally {
      this.renewing = false;
    }
  }
}

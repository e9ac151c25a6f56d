import { randomUUID } from "node:crypto";
import { kickBoardsAfterDream } from "@/lib/boards/kick-custom-board.ts";
import { getDatabase, type Db } from "@/lib/db/database.ts";
import { isForeignKeyViolation } from "@/lib/db/errors.ts";
import { inngestEnabled } from "@/lib/processing/processing-config.ts";
import { dreamConfig, type DreamConfig } from "./dream-config.ts";
import { switchSql } from "./dream-settings.ts";
import { claimDreamRun, executeDreamRun, heldBy, LostLeaseError, StoppedError } from "./run-dream.ts";

export const DREAM_RUN_EVENT = "engram/dream.run";

/** How much earlier than a whole interval after its last run a hub is due (see dueHubs). */
const SCHEDULE_SLACK_MS = 15 * 60_000;

/**
 * Hubs due a scheduled run: written to since their last run, or whose last run ran out of time or left
 * contradictions over its review bound or pairs over its merge bound (phase_metrics.similar.reviews_left,
 * merges_left; the next continues it: taken
 * only after a write, a hub no member wrote to again kept what that run left undone for good), and not
 * dreamt of for `intervalHours`. A
 * run's own rewrite of a merge's kept memory, or filing of a memory into a topic, is no write of the
 * hub's: its action (the memory as result_memory_id) is stamped with the updated_at the write left (not
 * the run's clock, which the forward trigger may have moved it past), and a member's later edit moves
 * the memory's past it. Not a hub whose dreams are off (its own switch; unset is on).
 */
export async function dueHubs(db: Db, now: Date, intervalHours: number, limit = 100): Promise<string[]> {
  // The slack is the schedule's own jitter: the daily cron's runs are created at the time its step read,
  // and on a day that step ran a few seconds earlier than the day before, a last run created exactly one
  // interval before was not yet "older than the interval", and every hub waited a second day.
  const since = new Date(now.getTime() - intervalHours * 3_600_000 + SCHEDULE_SLACK_MS);
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT h.id FROM hubs h
     WHERE h.deleted_at IS NULL
       AND (EXISTS (SELECT 1 FROM memories m WHERE m.hub_id = h.id AND m.state = 'active'
                     AND m.updated_at > coalesce((SELECT max(r.created_at) FROM dream_runs r WHERE r.hub_id = h.id), '-infinity'::timestamptz)
                     AND NOT EXISTS (SELECT 1 FROM dream_actions a WHERE a.hub_id = h.id AND a.action_type IN ('merge', 'organize')
                                        AND a.result_memory_id = m.id AND a.created_at = m.updated_at))
            OR EXISTS (SELECT 1 FROM (SELECT r.status, r.phase_metrics -> 'similar' -> 'reviews_left' AS left_over,
                                             r.phase_metrics -> 'similar' -> 'merges_left' AS merges_over FROM dream_runs r
                                        WHERE r.hub_id = h.id ORDER BY r.created_at DESC, r.id DESC LIMIT 1) last
                        WHERE last.status = 'partial_failed' OR (jsonb_typeof(last.left_over) = 'number' AND (last.left_over)::text::numeric > 0)
                           OR (jsonb_typeof(last.merges_over) = 'number' AND (last.merges_over)::text::numeric > 0)))
       AND NOT EXISTS (SELECT 1 FROM dream_runs r WHERE r.hub_id = h.id AND (r.created_at > ${since} OR r.status IN ('queued', 'running')))
       AND ${switchSql("dreams_enabled")}
     ORDER BY h.id LIMIT ${limit}`;
  return rows.map((row) => row.id);
}

/**
 * Of hubs dueHubs picked earlier (the Inngest schedule's memoized pick, replayed by every attempt of the
 * step that queues them), those still due, in their order: not purged nor marked deleted since, dreams
 * still on, and not dreamt since (a run created after the interval's bound, which at the pick none was, and
 * no longer waiting: one still waiting is the hub's run, sent with the others). Queued as picked, a purged
 * hub failed the run's insert on its foreign key and, replayed, every attempt of the step.
 */
export async function stillDueHubs(db: Db, hubIds: string[], now: Date, intervalHours: number): Promise<string[]> {
  if (!hubIds.length) return [];
  const since = new Date(now.getTime() - intervalHours * 3_600_000 + SCHEDULE_SLACK_MS);
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT h.id::text AS id FROM hubs h
     WHERE h.id = ANY(${hubIds}::uuid[]) AND h.deleted_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM dream_runs r WHERE r.hub_id = h.id AND r.created_at > ${since} AND r.status NOT IN ('queued', 'running'))
       AND ${switchSql("dreams_enabled")}`;
  const still = new Set(rows.map((row) => row.id));
  return hubIds.filter((id) => still.has(id));
}

/**
 * Runs waiting for a worker: queued ones, and running ones whose worker stopped heartbeating. Not those of
 * a hub marked deleted, whose purge removes them (a run meanwhile would ask the chat model for nothing).
 * Oldest first, through the partial index on the waiting runs' created_at (dream_runs_waiting_created_at_idx):
 * finished runs only grow, and every sweep read and sorted what it then cut to its limit.
 * $1: the stale heartbeat's bound, $2: the limit.
 */
export const PENDING_DREAM_RUNS_SQL = `SELECT r.id::text AS id, r.hub_id::text AS "hubId" FROM dream_runs r JOIN hubs h ON h.id = r.hub_id AND h.deleted_at IS NULL
  WHERE r.status IN ('queued', 'running') AND (r.status = 'queued' OR r.heartbeat_at < $1::timestamptz OR r.heartbeat_at IS NULL)
  ORDER BY r.created_at LIMIT $2::int`;

export async function pendingDreamRuns(db: Db, now: Date, staleRunMs: number, limit = 100): Promise<{ id: string; hubId: string }[]> {
  const stale = new Date(now.getTime() - staleRunMs);
  return db.$queryRawUnsafe<{ id: string; hubId: string }[]>(PENDING_DREAM_RUNS_SQL, stale, limit);
}

/**
 * Queues the schedule's run of each hub, in order; the runs queued (or found already queued). A hub
 * purged since it was picked is passed over: one hub's, not the whole schedule's failure (every due hub
 * after it waited for the next schedule). Used by the in-process schedule and the Inngest one.
 */
export async function queueScheduledRuns(db: Db, hubIds: string[], now: () => Date, options: { kick?: boolean } = {}): Promise<{ id: string; hubId: string }[]> {
  // Imported here: trigger-dream.ts imports this module (kickDreamRun).
  const { queueDreamRun } = await import("./trigger-dream.ts");
  const queued: { id: string; hubId: string }[] = [];
  for (const hubId of hubIds) {
    try {
      const result = await queueDreamRun(db, hubId, null, now(), undefined, options);
      queued.push({ id: result.run_id, hubId });
    } catch (error) {
      if (!isForeignKeyViolation(error)) throw error;
    }
  }
  return queued;
}

/**
 * A run that threw (not a crash) ends failed; the next trigger starts afresh. Its `error` is read by
 * every member of the hub: the exception's own text (a database statement, its tables and columns, a
 * provider's address) is the operator's, logged by the caller under the run's id.
 */
export async function failRun(db: Db, runId: string, owner: string, attempt?: string): Promise<void> {
  const error = `the run failed (details in the server log, dream run ${runId}); the next run starts afresh`;
  await db.dreamRun.updateMany({ where: { id: runId, ...heldBy(owner, attempt) }, data: { status: "failed", error, finishedAt: new Date() } });
}

/**
 * Claims and runs one run to its end; false when another worker holds it. `signal` (or `stopping`): the
 * process is stopping, the run's model calls in flight are cancelled and the run ends before its next
 * batch, left running with its heartbeat cleared, so the next sweep of any worker (this process's next
 * start with the embedded database) resumes it at once.
 */
export async function runDreamRunOnce(db: Db, runId: string, options: { owner?: string; config?: DreamConfig; stopping?: () => boolean; signal?: AbortSignal } = {}): Promise<boolean> {
  const database = await getDatabase();
  const config = options.config ?? dreamConfig();
  const owner = options.owner ?? `worker-${randomUUID()}`;
  if (!(await claimDreamRun(db, runId, owner, new Date(), config.staleRunMs))) return false;
  try {
    await executeDreamRun({ db, sql: database.sql, config, stopping: options.stopping, signal: options.signal }, runId, owner);
    // In the background: the next run need not wait for the chat model to answer every board. The run
    // is finished by now: its hub is read under the kick's guard, and a hub purged since (the run's row
    // gone with it) has no boards to ask; read outside it, that purge logged the finished run as failed.
    await db.dreamRun
      .findUnique({ where: { id: runId }, select: { hubId: true } })
      .then((run) => run && kickBoardsAfterDream(database, run.hubId, runId))
      .catch((error: unknown) => console.error(`[engram] dreams: run ${runId} could not ask its hub's boards again; the next run does`, error));
  } catch (error) {
    if (error instanceof LostLeaseError) return false;
    if (error instanceof StoppedError) {
      await db.dreamRun.updateMany({ where: { id: runId, status: "running", leaseOwner: owner }, data: { heartbeatAt: null } });
      return true;
    }
    console.error(`[engram] dreams: run ${runId} failed`, error);
    await failRun(db, runId, owner);
  }
  return true;
}

/**
 * The in-process dream worker: one run at a time for the whole process (a run
 * is CPU-heavy and the embedded database has one connection), fed by triggers,
 * an hourly schedule of due hubs, and a sweep that resumes crashed runs.
 */
export class DreamRunner {
  private readonly queue: string[] = [];
  private running: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private waiters: (() => void)[] = [];
  private stopped = false;
  /** Aborted by stop(): a run's model call in flight (up to ENGRAM_DREAM_MODEL_TIMEOUT_MS, 30 s) outlasted the stop's grace (10 s). */
  private readonly stopSignal = new AbortController();
  private readonly owner = `process-${randomUUID()}`;

  constructor(private readonly options: { db: () => Promise<Db>; config?: DreamConfig; schedule: boolean; exclusiveDatabase: boolean }) {}

  start(): void {
    void this.sweep();
    const sweep = setInterval(() => void this.sweep(), 60_000);
    sweep.unref();
    this.timers.push(sweep);
    if (this.options.schedule) {
      const schedule = setInterval(() => void this.schedule(), 3_600_000);
      schedule.unref();
      this.timers.push(schedule);
      void this.schedule();
    }
  }

  stop(): void {
    this.stopped = true;
    this.stopSignal.abort();
    for (const t of this.timers) clearInterval(t);
    this.queue.length = 0;
  }

  enqueue(runId: string): void {
    if (this.stopped || this.queue.includes(runId)) return;
    this.queue.push(runId);
    this.pump();
  }

  idle(): Promise<void> {
    if (!this.running && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private pump(): void {
    if (this.running) return;
    // Stopped: the queue was emptied, so the run that just ended was the last; idle() waiters go now.
    const next = this.stopped ? undefined : this.queue.shift();
    if (!next) {
      for (const resolve of this.waiters.splice(0)) resolve();
      return;
    }
    // Cleared only after it is stored: a run that fails before its first await settles synchronously
    // (the same trap as the processing runner's sweep, embedded-runner.ts).
    const running = this.runOnce(next).finally(() => {
      this.running = undefined;
      this.pump();
    });
    this.running = running;
  }

  private async runOnce(id: string): Promise<void> {
    try {
      const config = this.options.config ?? dreamConfig();
      // With the embedded database this process is the only one: a `running` run from before is a crashed one.
      const effective = this.options.exclusiveDatabase ? { ...config, staleRunMs: 0 } : config;
      await runDreamRunOnce(await this.options.db(), id, { owner: this.owner, config: effective, stopping: () => this.stopped, signal: this.stopSignal.signal });
    } catch (error) {
      console.error(`[engram] dreams: run ${id} could not run now`, error);
    }
  }

  async sweep(): Promise<void> {
    try {
      const config = this.options.config ?? dreamConfig();
      const db = await this.options.db();
      const runs = await pendingDreamRuns(db, new Date(), this.options.exclusiveDatabase ? 0 : config.staleRunMs);
      for (const run of runs) this.enqueue(run.id);
    } catch (error) {
      console.error("[engram] dreams: sweep failed", error);
    }
  }

  async schedule(): Promise<void> {
    try {
      const config = this.options.config ?? dreamConfig();
      const db = await this.options.db();
      await queueScheduledRuns(db, await dueHubs(db, new Date(), config.intervalHours), () => new Date());
    } catch (error) {
      console.error("[engram] dreams: schedule failed", error);
    }
  }
}

const globalForDreams = globalThis as unknown as { __engramDreams?: { runner?: DreamRunner; stop?: AbortController } };
const state = (globalForDreams.__engramDreams ??= {});

/** Starts the in-process worker (server start-up), unless Inngest runs dreams or ENGRAM_DREAMS=off. */
export async function startDreams(): Promise<void> {
  // A start after a stop (in this same process) is a new life: the old stop's mark, left aborted, made
  // every later Inngest phase step here end at once as stopping, and the run never got past it.
  if (state.stop?.signal.aborted) state.stop = undefined;
  if (process.env.ENGRAM_DREAMS === "off" || inngestEnabled() || state.runner) return;
  const database = await getDatabase();
  state.runner = new DreamRunner({
    db: async () => (await getDatabase()).prisma,
    schedule: process.env.ENGRAM_DREAM_SCHEDULE !== "off",
    exclusiveDatabase: database.kind === "pglite",
  });
  state.runner.start();
}

export function dreamRunner(): DreamRunner | undefined {
  return state.runner;
}

/**
 * A graceful stop: the worker takes no new run, and the run in progress ends before its next batch
 * (resumed later). Resolves once it has: without it the stop closed the database under the run's next
 * batch, and the run was logged as failed.
 */
export function stopDreams(): Promise<void> {
  (state.stop ??= new AbortController()).abort();
  const runner = state.runner;
  runner?.stop();
  state.runner = undefined;
  return runner?.idle() ?? Promise.resolve();
}

/**
 * Aborted by a graceful stop (stopDreams): the Inngest function's phase step running in this process ends
 * before its next batch, its model calls cancelled, as the in-process worker's run does. By then the
 * server has cut the step's request (past its grace) and Inngest retries the step, maybe elsewhere and
 * under the same lease: without it the step went on writing and asking the model beside that retry
 * until the database closed under it.
 */
export function dreamsStopSignal(): AbortSignal {
  return (state.stop ??= new AbortController()).signal;
}

/** Hands a queued run to whichever worker is active: an Inngest event, or the in-process runner. */
export async function kickDreamRun(hubId: string, runId: string): Promise<void> {
  if (inngestEnabled()) {
    const { inngest } = await import("@/inngest/client.ts");
    await inngest.send({ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }).catch((error: unknown) => {
      // The run stays queued; the scheduled function's sweep sends it again.
      console.error(`[engram] dreams: could not send run ${runId} to Inngest`, error);
    });
    return;
  }
  state.runner?.enqueue(runId);
}

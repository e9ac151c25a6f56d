import { runAsBackground } from "@/lib/db/background-work.ts";
import { IMAGE_READS_AT_ONCE, readTurnOf, type ReadTurn } from "@/lib/extraction/extract-memory-text.ts";
import type { Db } from "@/lib/db/database.ts";
import { FairQueue } from "./fair-queue.ts";
import { JobLease } from "./job-lease.ts";
import { claimMemory, processMemory } from "./process-memory.ts";
import { retryDelayMs, type ProcessingConfig } from "./processing-config.ts";
import { Prisma } from "@/lib/db/generated/client.ts";

/** Sweeps take this many candidates at a time; the next sweep follows as soon as they drain. */
const SWEEP_PAGE = 200;
/** A backlog's next page is read once fewer than this are queued, so workers do not wait for it. */
const REFILL_BELOW = SWEEP_PAGE / 2;
/**
 * Ids the runner holds waiting for a worker. Every memory write enqueued its id, so an import faster
 * than the model kept them all in memory for as long as the backlog lasted; past this the id is left
 * to the database (the row is pending) and a sweep pages through the backlog once the queue drains.
 */
export const MAX_QUEUED_JOBS = 10_000;
/**
 * Document jobs (PDF, Office and text files not read yet) holding workers at once: one reading (the
 * process reads one document at a time) and one ready behind it. Each of the others waited for that
 * turn in a worker, so a bulk PDF import took all of them and text pushed after it waited for hours.
 */
export const DOCUMENT_JOBS_AT_ONCE = 2;
/**
 * Parked jobs of each read turn held at most (and never past a quarter of the queue's bound): the others
 * are left to the database, unclaimed, and sweeps leave that turn's unread files off their pages until
 * fewer than its jobs-at-once are parked. Parked without a bound, an import of 40,000 photos took the whole queue, so every
 * write after it waited in the database until the images were read, three at a time.
 */
const PARKED_PER_TURN = SWEEP_PAGE;
/** Jobs of each read turn that may hold workers at once; the others are parked. */
const TURN_JOBS_AT_ONCE: Record<ReadTurn, number> = { image: IMAGE_READS_AT_ONCE, document: DOCUMENT_JOBS_AT_ONCE };
const READ_TURNS: ReadTurn[] = ["image", "document"];
/**
 * Hubs of each read turn remembered as having files left in the database by park. Past it, every hub's
 * new file of that turn waits there (as if each had some): the sets stay bounded.
 */
const TURN_HUBS_IN_DATABASE = 1_000;

export interface FindPendingOptions {
  /** `running` rows started (or last renewed) before this are orphans of a dead worker. */
  staleBefore: Date;
  retryBaseMs: number;
  /**
   * With Inngest, whose queue holds each memory's event until a run is free: only rows whose event went
   * out before this, with the write that made them wait (updated_at) or a sweep's re-send (processing_queued_at).
   */
  sentBefore?: Date;
  limit?: number;
  now?: Date;
  /**
   * Read turns whose files not read yet are left off the page (the embedded runner's turns with parked
   * jobs): a page full of them could not be started, so the rows after them were never reached. A
   * condition, not a list of the parked ids: one parameter each, past Prisma's 32,766 the query failed.
   */
  skipUnread?: ReadTurn[];
}

/** Memories waiting for a worker, in hubs not marked deleted: pending ones whose retry is due, and running ones whose worker is presumed dead. */
export async function findPendingMemories(db: Db, options: FindPendingOptions): Promise<string[]> {
  return (await findPendingJobs(db, options)).map((row) => row.id);
}

/** findPendingMemories with each memory's hub (the embedded runner queues each hub's memories in a lane of its own). */
async function findPendingJobs(db: Db, { staleBefore, retryBaseMs, sentBefore, limit = SWEEP_PAGE, now = new Date(), skipUnread = [] }: FindPendingOptions): Promise<{ id: string; hubId: string }[]> {
  const skipped = skipUnread.map(notUnread);
  const unsent: Prisma.MemoryWhereInput[] = sentBefore ? [{ OR: [{ processingQueuedAt: null }, { processingQueuedAt: { lt: sentBefore } }] }] : [];
  return db.memory.findMany({
    where: {
      // A hub marked deleted is being purged: processing its memories would only spend the model.
      hub: { deletedAt: null },
      ...(skipped.length > 0 && { AND: skipped }),
      OR: [
        { processingStatus: "pending", AND: [{ OR: retryDue(now, retryBaseMs) }, ...(sentBefore ? [{ updatedAt: { lt: sentBefore } }] : []), ...unsent] },
        { processingStatus: "running", AND: [{ OR: [{ processingStartedAt: { lt: staleBefore } }, { processingStartedAt: null }] }, ...unsent] },
      ],
    },
    orderBy: { updatedAt: "asc" },
    take: limit,
    select: { id: true, hubId: true },
  });
}

/** Rows that are no file of `turn` waiting to be read (readTurnOf's test, in SQL). */
function notUnread(turn: ReadTurn): Prisma.MemoryWhereInput {
  const image: Prisma.MemoryWhereInput = { fileRef: { path: ["content_type"], string_starts_with: "image/" } };
  // A file with no content_type is a document to readTurnOf, but NOT (NULL LIKE 'image/%') is NULL in
  // SQL: while images were parked such a row was left off every sweep's page.
  const notImage: Prisma.MemoryWhereInput = { OR: [{ NOT: image }, { fileRef: { path: ["content_type"], equals: Prisma.AnyNull } }] };
  return { OR: [{ extractedAt: { not: null } }, { fileRef: { equals: Prisma.AnyNull } }, turn === "image" ? notImage : image] };
}

/**
 * `running` rows whose worker is presumed dead (a process killed mid-job), oldest first: what a sweep
 * takes over whatever its queue holds, so another process's orphans never wait for this one's backlog.
 */
export async function findOrphanedJobs(db: Db, { staleBefore, limit = SWEEP_PAGE }: { staleBefore: Date; limit?: number }): Promise<string[]> {
  const rows = await db.memory.findMany({
    where: { hub: { deletedAt: null }, processingStatus: "running", OR: [{ processingStartedAt: { lt: staleBefore } }, { processingStartedAt: null }] },
    orderBy: { updatedAt: "asc" },
    take: limit,
    select: { id: true },
  });
  return rows.map((row) => row.id);
}

/**
 * Pending rows that claimMemory would take now: never tried, or past the backoff of their attempts
 * (at its shortest jitter, as claimMemory reckons it). Rows still waiting stay off the page: a page
 * full of them came back on every sweep, and due rows sorted after them were never reached.
 */
function retryDue(now: Date, retryBaseMs: number): Prisma.MemoryWhereInput[] {
  const due: Prisma.MemoryWhereInput[] = [{ processingAttempts: 0 }, { processingStartedAt: null }];
  // One clause per attempt count until the delay reaches its cap, then one for every count above.
  for (let attempts = 1; ; attempts++) {
    const delayMs = retryDelayMs(attempts, retryBaseMs, () => 0);
    const startedAt = { lte: new Date(now.getTime() - delayMs) };
    if (delayMs < retryDelayMs(attempts + 1, retryBaseMs, () => 0)) {
      due.push({ processingAttempts: attempts, processingStartedAt: startedAt });
      continue;
    }
    due.push({ processingAttempts: { gte: attempts }, processingStartedAt: startedAt });
    return due;
  }
}

/** Where a job that must wait for its read turn is parked: its turn, in its hub's lane. */
interface Parks {
  turn: ReadTurn;
  hubId: string;
}

export interface EmbeddedRunnerOptions extends ProcessingConfig {
  db: () => Promise<Db>;
  /**
   * The embedded database can be opened by one process only, so at start-up
   * every `running` row belongs to a process that died: resume them at once
   * instead of waiting for the stale timeout.
   */
  exclusiveDatabase: boolean;
  /** Tests: a smaller MAX_QUEUED_JOBS. */
  maxQueued?: number;
}

/**
 * The in-process runner: a bounded queue of memory ids fed by writes, retry
 * timers and a periodic sweep of the database (the durable record), served
 * hub by hub in turn (fair-queue.ts). Jobs run concurrently so their chunks
 * share embedding batches.
 */
export class EmbeddedRunner {
  private readonly queued = new FairQueue();
  private readonly active = new Set<string>();
  /** Active ids written again while they ran, with their hub: queued again once their job ends. */
  private readonly again = new Map<string, string | undefined>();
  /**
   * Jobs of each read turn running until their text is written (or started from `parked`, their turn
   * kept for them): at most TURN_JOBS_AT_ONCE of each. The rest of such a job holds only its worker.
   */
  private readonly turnJobs: Record<ReadTurn, Set<string>> = { image: new Set(), document: new Set() };
  /**
   * Files not read yet that came up while TURN_JOBS_AT_ONCE jobs of their turn ran: they wait here,
   * unclaimed, not in a worker. Run as they came, they waited for their turn (the vision model's, the
   * documents' one reader) in the workers, and 40 photos or a bulk PDF import took all 16 while text
   * and links pushed after them waited for up to an hour.
   * An id is in at most one of `queued`, the parked sets and `active` (only queue() and park() add to
   * the first two, and never for an active id): one in two of them was started twice, and the twin that
   * lost the claim gave back the turn the other still held, so a fourth image job started.
   */
  private readonly parked: Record<ReadTurn, FairQueue> = { image: new FairQueue(), document: new FairQueue() };
  /**
   * Turns whose files may wait in the database unread, left off a sweep's page or not parked (past their
   * bound). While it is set, a new file of the turn waits in the database behind them, not parked.
   */
  private readonly leftInDatabase: Record<ReadTurn, boolean> = { image: false, document: false };
  /**
   * Hubs of each turn whose own files were left in the database by park (past the bound, or making room),
   * until a sweep reads that turn's files again: such a hub gets no place among the parked though it has
   * none parked. Given one, its newest upload was read before its own older files waiting there.
   */
  private readonly turnHubsInDatabase: Record<ReadTurn, Set<string>> = { image: new Set(), document: new Set() };
  /** More hubs than TURN_HUBS_IN_DATABASE left files of the turn there: no hub gets a place past the bound. */
  private readonly everyTurnHubInDatabase: Record<ReadTurn, boolean> = { image: false, document: false };
  /**
   * Ids queueFirst put ahead (a dead process's jobs) until their job ends: one that must wait for its read
   * turn is parked at the head of its turn, not left to the database behind the files waiting there. Left
   * there, each sweep put it first and left it again, and it waited until every file of its kind was read.
   */
  private readonly orphans = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly startedAt = new Date();
  private sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private idleWaiters: (() => void)[] = [];
  private stopped = false;
  /** stop(): the jobs in progress end too (a drain lets them finish first). */
  private cutShort = false;
  /** Jobs finished since start, by outcome (reported in logs and by the benchmark). */
  readonly stats = { done: 0, stale: 0, retried: 0, failed: 0 };

  /** Renews the claims of running jobs, so other processes on the same database leave them alone. */
  private readonly lease: JobLease;

  constructor(private readonly options: EmbeddedRunnerOptions) {
    this.lease = new JobLease(options.db, options.leaseMs);
  }

  start(): void {
    void this.sweep();
    this.sweepTimer = setInterval(() => void this.sweep(), this.options.sweepMs);
    this.sweepTimer.unref();
  }

  /** Stops at once: jobs in progress lose their lease and abort at their next step. */
  stop(): void {
    this.cutShort = true;
    this.halt();
    this.lease.stop();
    this.notifyIdle();
  }

  /** Takes no more work: no sweeps, no retries, nothing queued. */
  private halt(): void {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    clearTimeout(this.followUp);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.queued.clear();
    for (const turn of READ_TURNS) {
      this.parked[turn].clear();
      this.clearTurnHubs(turn);
    }
    this.again.clear();
    this.orphans.clear();
  }

  /**
   * Graceful stop: takes nothing new and gives the jobs in progress up to graceMs to finish (their
   * leases keep being renewed meanwhile), then stops. Returns how many were cut short; their
   * leases lapse and a sweep (another process, or this one after a restart) resumes them.
   */
  async drain(graceMs: number): Promise<number> {
    this.halt();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    const unfinished = this.active.size;
    this.stop();
    return unfinished;
  }

  /** `hubId`: the memory's hub, whose lane it waits in (without it, a lane shared by every id not placed). */
  enqueue(id: string, hubId?: string): void {
    if (this.stopped) return;
    // Written again, it is no dead process's job any more: marked still, the new write was parked ahead of
    // every file of its kind waiting, those in the database too. (An active one's mark goes as its job ends.)
    if (!this.active.has(id)) this.orphans.delete(id);
    // Written again while parked: it may be no file to read now, so it is looked at again in its queue turn.
    if (this.isParked(id)) this.queue(id, hubId);
    else if (this.active.has(id)) this.again.set(id, hubId ?? this.again.get(id));
    // While memories wait in the database, a new write waits behind them there too: queued ahead, a
    // steady stream of writes kept the queue from ever draining and the backlog waited for good.
    else if (this.queued.has(id) || (!this.backlog && this.queued.size + this.parkedCount() < this.maxQueued())) this.queue(id, hubId);
    // Not so a hub with nothing queued: left there, another hub's import past the bound kept its push
    // waiting until the whole import was processed (sweeps read the backlog oldest first).
    else if (hubId !== undefined && this.roomForLane(hubId)) this.queue(id, hubId);
    else {
      this.backlog = true;
      // Nothing running may be left to ask for the next page (a sweep that failed, say).
      if (this.queued.size < REFILL_BELOW) this.sweepSoon();
    }
    this.pump();
  }

  /** Resolves when nothing is queued or running (retry timers may still be pending). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  get size(): { queued: number; active: number } {
    return { queued: this.queued.size + this.parkedCount(), active: this.active.size };
  }

  private notifyIdle(): void {
    if (this.isIdle()) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private isIdle(): boolean {
    // Once stopped, what a sweep still finds is never started: only the running jobs count.
    return this.active.size === 0 && (this.stopped || (this.queued.size === 0 && this.parkedCount() === 0 && !this.sweeping));
  }

  private staleBefore(now: Date): Date {
    // Running jobs renew their lease (job-lease.ts): one not renewed for a whole lease has no live worker.
    const timeout = now.getTime() - this.options.leaseMs;
    return new Date(this.options.exclusiveDatabase ? Math.max(timeout, this.startedAt.getTime()) : timeout);
  }

  /** Enqueues what the database says is waiting; pages through a backlog as the queue drains. */
  sweep(): Promise<void> {
    if (this.sweeping) return this.sweeping;
    // Cleared only after it is stored: a sweep that returns without awaiting (a full queue) settles
    // synchronously, and clearing it inside would leave every later sweep waiting on a finished one.
    const sweeping = this.sweepOnce().finally(() => {
      this.sweeping = undefined;
      this.pump();
      this.notifyIdle();
    });
    this.sweeping = sweeping;
    return sweeping;
  }

  private async sweepOnce(): Promise<void> {
    try {
      // A dead process's jobs go first, whatever waits here: they were claimed (and waited) before, and
      // otherwise sat until this queue drained below a page, or the backlog before them was worked through.
      const db = await this.options.db();
      const orphans = await runAsBackground(() => findOrphanedJobs(db, { staleBefore: this.staleBefore(new Date()) }));
      this.queueFirst(orphans);
      if (this.queued.size >= SWEEP_PAGE) return;
      // Cleared before the read, not after: a write left out of the full queue while it ran may not be in it.
      this.backlog = false;
      // A turn with parked jobs cannot start another now: a page of its files kept the rest waiting. Its
      // files left in the database are read once its parked jobs run low (pump), not only once they are
      // gone: then the turn waited idle for the sweep.
      const skipUnread = READ_TURNS.filter((turn) => this.parked[turn].size >= this.lowMark(turn));
      for (const turn of READ_TURNS) {
        this.leftInDatabase[turn] = skipUnread.includes(turn);
        // The page reads the turn's files from the oldest: its hubs' marks go, and park marks again those
        // it leaves there (also while the page is read). Rows past a full page are not tracked.
        if (!this.leftInDatabase[turn]) this.clearTurnHubs(turn);
      }
      const ids = await runAsBackground(() => findPendingJobs(db, { staleBefore: this.staleBefore(new Date()), retryBaseMs: this.options.retryBaseMs, skipUnread }));
      for (const { id, hubId } of ids) {
        if (this.active.has(id) || this.isParked(id) || this.stopped) continue;
        if (this.queued.size + this.parkedCount() >= this.maxQueued()) {
          this.backlog = true;
          break;
        }
        this.queue(id, hubId);
      }
      if (ids.length === SWEEP_PAGE) this.backlog = true;
    } catch (error) {
      // The backlog is still there: the next refill tries again.
      this.backlog = true;
      console.error("[engram] processing: sweep failed", error);
    }
  }

  /**
   * Puts `ids` at the head of the queue (in their order), ahead of every hub's lane. The queue keeps its
   * bound: the ids queued last in the longest lanes make room and are left to the database (their rows
   * are pending), read back as a backlog; with no more room to make, the rest of `ids` are left there too
   * (still `running` with a dead worker, so the next sweep puts them first). Queued whatever the bound, a
   * page of 200 orphans took a small queue far past it.
   */
  private queueFirst(ids: string[]): void {
    for (const id of ids) {
      if (this.active.has(id) || this.isParked(id) || this.stopped) continue;
      if (!this.queued.has(id) && this.queued.size + this.parkedCount() >= this.maxQueued()) {
        this.backlog = true;
        if (this.queued.dropNewest() === undefined) return;
      }
      this.queued.addFirst(id);
      this.orphans.add(id);
    }
  }

  /**
   * Whether a hub with nothing queued gets a place while writes wait in the database (or the queue is
   * full): one id at a time, the newest of the longest lane making room (its row is pending, read back
   * by a sweep). A stream of writes into that hub cannot keep the backlog from draining: it has one id
   * queued at most beyond its turn.
   */
  private roomForLane(hubId: string): boolean {
    if (this.queued.laneSize(hubId) > 0) return false;
    if (this.queued.size + this.parkedCount() < this.maxQueued()) return true;
    if (this.queued.longestLane() <= 1) return false;
    this.queued.dropNewest();
    this.backlog = true;
    return true;
  }

  /** The only ways into `queued` and `parked`: each takes the id out of the other (see `parked`). */
  private queue(id: string, hubId?: string): void {
    for (const turn of READ_TURNS) this.parked[turn].delete(id);
    this.queued.add(id, hubId);
  }

  private park(id: string, { turn, hubId }: Parks, first = false): void {
    this.queued.delete(id);
    if (first) return this.parkFirst(id, turn);
    const parked = this.parked[turn];
    // While files of its turn wait in the database, a newer one waits there behind them: parked whenever
    // the set had room, photos uploaded at the model's pace kept it from running low, and the older ones
    // in the database waited for good, the newest read first.
    if (!this.leftInDatabase[turn] && parked.size < this.parkedPerTurn() && this.queued.size + this.parkedCount() < this.maxQueued()) return void parked.add(id, hubId);
    // Not so a hub with none of its files parked (parked ones are taken hub by hub in turn): behind them
    // in the database, another hub's photo waited until a whole photo import was read. The newest parked
    // file of the hub with the most makes room when there is none, and waits in the database instead.
    // Not a hub whose own files of the turn wait in the database, though: its newest went ahead of them.
    this.leftInDatabase[turn] = true;
    if (parked.laneSize(hubId) === 0 && !this.everyTurnHubInDatabase[turn] && !this.turnHubsInDatabase[turn].has(hubId)) {
      const room = parked.size < this.parkedPerTurn() && this.queued.size + this.parkedCount() < this.maxQueued();
      if (room) return void parked.add(id, hubId);
      if (parked.longestLane() > 1) {
        this.markTurnInDatabase(turn, [parked.dropNewest()!]);
        return void parked.add(id, hubId);
      }
    }
    // Left to the database (its row is pending, never claimed): a sweep reads it once its turn's parked jobs run low.
    this.markTurnInDatabase(turn, [hubId]);
  }

  private markTurnInDatabase(turn: ReadTurn, hubs: string[]): void {
    for (const hub of hubs) {
      if (this.turnHubsInDatabase[turn].has(hub)) continue;
      if (this.turnHubsInDatabase[turn].size >= TURN_HUBS_IN_DATABASE) this.everyTurnHubInDatabase[turn] = true;
      else this.turnHubsInDatabase[turn].add(hub);
    }
  }

  private clearTurnHubs(turn: ReadTurn): void {
    this.turnHubsInDatabase[turn].clear();
    this.everyTurnHubInDatabase[turn] = false;
  }

  /** An orphan waiting for its turn: parked ahead of the others, the newest parked one making room when the set is full. */
  private parkFirst(id: string, turn: ReadTurn): void {
    this.parked[turn].addFirst(id);
    if (this.parked[turn].size <= this.parkedPerTurn() && this.queued.size + this.parkedCount() <= this.maxQueued()) return;
    this.leftInDatabase[turn] = true;
    // Only orphans parked: this one waits in the database too (still `running`, the next sweep puts it first).
    const made = this.parked[turn].dropNewest();
    if (made === undefined) this.parked[turn].delete(id);
    else this.markTurnInDatabase(turn, [made]);
  }

  private parkedPerTurn(): number {
    return Math.max(1, Math.min(PARKED_PER_TURN, Math.floor(this.maxQueued() / 4)));
  }

  /** Parked jobs of a turn below which its files left in the database are read: a sweep then refills the set before it empties. */
  private lowMark(turn: ReadTurn): number {
    return Math.min(TURN_JOBS_AT_ONCE[turn], this.parkedPerTurn());
  }

  /** Files of a turn left in the database whose parked jobs run low (started, or written again as something else). */
  private unparkedLeft(): boolean {
    return READ_TURNS.some((turn) => this.leftInDatabase[turn] && this.parked[turn].size < this.lowMark(turn));
  }

  private maxQueued(): number {
    return this.options.maxQueued ?? MAX_QUEUED_JOBS;
  }

  private isParked(id: string): boolean {
    return READ_TURNS.some((turn) => this.parked[turn].has(id));
  }

  private parkedCount(): number {
    return this.parked.image.size + this.parked.document.size;
  }

  private backlog = false;
  private followUp: NodeJS.Timeout | undefined;

  /** A backlog is paged through one sweep per second at most, so rows that cannot be claimed yet never spin. */
  private sweepSoon(): void {
    if (this.followUp || this.stopped) return;
    this.followUp = setTimeout(() => {
      this.followUp = undefined;
      void this.sweep();
    }, 1000);
    this.followUp.unref();
  }

  private pump(): void {
    while (!this.stopped && this.active.size < this.options.concurrency) {
      const id = this.nextJob();
      if (id === undefined) break;
      this.active.add(id);
      // Background work: requests' statements go first (lib/db/background-work.ts).
      void runAsBackground(() => this.run(id)).then((parks) => {
        this.active.delete(id);
        // Parked (or queued again) only once no longer active: while it ran, a write put it in `again`,
        // and parked as well it was both queued and parked. Written again, it may be another file (or
        // none) now: it is looked at again in its queue turn.
        const orphan = this.orphans.delete(id);
        if (this.again.has(id)) {
          const hubId = this.again.get(id);
          this.again.delete(id);
          this.queue(id, hubId);
        }
        else if (parks && !this.stopped) this.park(id, parks, orphan);
        // Refilled before the queue runs dry, oldest first (the sweep's order): the page read then holds
        // what is still queued and the oldest of the backlog after it.
        if (this.queued.size < REFILL_BELOW && (this.backlog || this.unparkedLeft())) this.sweepSoon();
        this.pump();
        this.notifyIdle();
      });
    }
  }

  /** A parked file first once its turn is free (it came before what is queued now), else the queue's head. */
  private nextJob(): string | undefined {
    for (const turn of READ_TURNS) {
      if (this.turnJobs[turn].size >= TURN_JOBS_AT_ONCE[turn] || this.parked[turn].size === 0) continue;
      const id = this.parked[turn].shift()!;
      this.turnJobs[turn].add(id);
      return id;
    }
    return this.queued.shift();
  }

  /** Runs one job; the read turn to park it in when it is a file whose turn's jobs are all taken, left unclaimed. */
  private async run(id: string): Promise<Parks | undefined> {
    try {
      const db = await this.options.db();
      // Started from the other turn's parked set (written since as another kind of file): that turn is given back.
      const { turn, hubId } = await this.readTurn(db, id);
      for (const other of READ_TURNS) if (other !== turn) this.turnJobs[other].delete(id);
      if (turn) {
        // Not started from `parked` while files of its turn wait in the database: those are older, and go
        // first. Not so a dead process's job: it was claimed before any of them.
        const behindDatabase = this.leftInDatabase[turn] && !this.orphans.has(id);
        if (!this.turnJobs[turn].has(id) && (this.turnJobs[turn].size >= TURN_JOBS_AT_ONCE[turn] || behindDatabase)) return { turn, hubId };
        this.turnJobs[turn].add(id);
      }
      // Stopped (not drained) while this job waited for the database: it is not started, its row left as it is.
      if (this.cutShort) return undefined;
      const now = new Date();
      const claim = await claimMemory(db, id, { ...this.options, now, staleBefore: this.staleBefore(now) });
      if (!claim) return undefined;
      const signal = this.lease.hold(id, claim.attempt, claim.memory.version);
      // The turn is given back once the text is read and written, not at the job's end: held through the
      // classification, embedding and summary, two documents waiting for the model kept every other one
      // parked while the reader sat idle.
      const onExtracted = () => {
        if (!turn || !this.turnJobs[turn].delete(id)) return;
        this.pump();
      };
      const outcome = await processMemory(db, claim, { ...this.options, signal, onExtracted }).finally(() => this.lease.release(id));
      if (outcome.status === "done") this.stats.done++;
      else if (outcome.status === "stale") this.stats.stale++;
      else if (outcome.status === "failed") {
        this.stats.failed++;
        console.error(`[engram] processing: memory ${id} failed after ${claim.attempt} attempts: ${outcome.error}`);
      } else {
        this.stats.retried++;
        console.warn(`[engram] processing: memory ${id} attempt ${claim.attempt} failed (${outcome.error}); retrying in ${outcome.delayMs} ms`);
        const timer = setTimeout(() => {
          this.timers.delete(timer);
          this.enqueue(id, claim.memory.hubId);
        }, outcome.delayMs);
        timer.unref();
        this.timers.add(timer);
      }
    } catch (error) {
      // Claim or bookkeeping failed (database unavailable): the row keeps its status and the sweeper returns to it.
      console.error(`[engram] processing: memory ${id} could not be processed now`, error);
    } finally {
      for (const turn of READ_TURNS) this.turnJobs[turn].delete(id);
    }
    return undefined;
  }

  /** The read turn this memory's job waits for (extraction of a file not read yet), if any. */
  private async readTurn(db: Db, id: string): Promise<{ turn: ReadTurn | null; hubId: string }> {
    const row = await db.memory.findUnique({ where: { id }, select: { hubId: true, fileRef: true, contentType: true, extractedAt: true } });
    return row === null ? { turn: null, hubId: "" } : { turn: readTurnOf(row), hubId: row.hubId };
  }
}

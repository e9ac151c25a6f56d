import { Worker, type Transferable, type WorkerOptions } from "node:worker_threads";

/** A worker's messages: first `{ ready: true }` (or `{ ready: false, error }`), then one `{ id, … }` or `{ id, error }` a task. */
export interface WorkerReply {
  id?: number;
  ready?: boolean;
  error?: string;
}

export interface WorkerLaneOptions {
  script: string;
  /** Read each time a worker starts. */
  workerOptions?: () => WorkerOptions;
  /** A task's time limit, read when the task reaches the worker. */
  timeoutMs: () => number;
  timedOut(ms: number): Error;
  /** Why starting failed: the worker's first message was not `{ ready: true }`. */
  loadFailed(reply: WorkerReply): Error;
  /** The worker's 'error' event (an uncaught throw, ERR_WORKER_OUT_OF_MEMORY), with the options it started with. */
  crashed(error: Error & { code?: string }, options: WorkerOptions | undefined): Error;
  /** The worker exited without an error, before it was ready or after. */
  exited(code: number, loaded: boolean): Error;
}

interface Job<Reply> {
  message: object & { id: number };
  transfer: Transferable[];
  resolve(reply: Reply): void;
  reject(error: Error): void;
  /** It left the queue for the worker: from now on its signal ends the worker instead. */
  started(): void;
  signal?: AbortSignal;
  givenUp(): Error;
}

interface Live<Reply> {
  worker: Worker;
  /** Settles once the worker is ready, or with why it never will be. */
  ready: Promise<void>;
  loaded: boolean;
  ended: boolean;
  end(error: Error): void;
  /** The running task's handlers, while one runs. */
  onReply?: (reply: Reply) => void;
  onEnd?: (error: Error) => void;
}

/**
 * One long-lived worker thread, one task at a time: the time limit runs from when a task reaches
 * the worker, so tasks queued behind a slow one are not charged for its time. A task over its
 * limit terminates the worker (code stuck in a loop or a native call cannot be interrupted any
 * other way); a worker that crashes or exits fails its task; either way the next task starts a
 * fresh worker. The worker keeps the process alive only while a task runs. Serves the extraction
 * thread (lib/extraction) and the local embedding model's threads (lib/ai).
 */
export class WorkerLane<Reply extends WorkerReply> {
  private readonly queue: Job<Reply>[] = [];
  private live?: Live<Reply>;
  private busy = false;
  private nextId = 0;
  /**
   * Workers ended and not yet exited. terminate() is asynchronous: a task started on a
   * fresh worker at once had two threads alive side by side (for the extraction thread, two parses' memory).
   */
  private readonly exiting = new Set<Promise<unknown>>();

  constructor(private readonly options: WorkerLaneOptions) {}

  /** Starts a worker now, unless one runs: rejects when it cannot load. */
  async start(): Promise<void> {
    await (await this.current()).ready;
  }

  /** The live worker, or a new one once every ended worker has exited. */
  private async current(): Promise<Live<Reply>> {
    // Another worker may end while this waits: it goes first too.
    while (!this.live && this.exiting.size > 0) await Promise.all(this.exiting);
    return this.live ?? this.spawn();
  }

  /**
   * The worker's reply to `message` (sent with an `id` of its own); rejects with its `error`, a limit or a crash.
   * A `signal` that aborts while the task still waits for the worker takes it out of the queue, rejected
   * with the signal's reason: a job whose lease was lost otherwise held its worker (and the bytes it sent)
   * behind every slow task ahead of it. A task the worker has started is stopped with the worker, which
   * the next task starts afresh: it otherwise ran on to its end or its time limit (a long PDF's parse,
   * 30 s by default), the thread's CPU and every task behind it spent on a result no one takes.
   */
  run(message: object, transfer: Transferable[] = [], signal?: AbortSignal): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const reason = () => (signal!.reason instanceof Error ? signal!.reason : new Error("the task was given up"));
      if (signal?.aborted) return reject(reason());
      const leave = () => {
        const at = this.queue.indexOf(job);
        if (at < 0) return;
        this.queue.splice(at, 1);
        reject(reason());
      };
      const started = () => signal?.removeEventListener("abort", leave);
      const job: Job<Reply> = { message: { ...message, id: this.nextId++ }, transfer, resolve, reject, started, signal, givenUp: reason };
      this.queue.push(job);
      signal?.addEventListener("abort", leave, { once: true });
      void this.next();
    });
  }

  private async next(): Promise<void> {
    if (this.busy) return;
    const job = this.queue.shift();
    if (!job) return;
    job.started();
    this.busy = true;
    let live: Live<Reply>;
    try {
      // A worker may end while idle, between being ready and this task reaching it.
      do {
        live = await this.current();
        await live.ready;
      } while (live.ended);
    } catch (error) {
      this.finish(() => job.reject(error as Error));
      return;
    }
    // Given up while the worker started: nothing reached it, and it stays for the next task.
    if (job.signal?.aborted) {
      this.finish(() => job.reject(job.givenUp()));
      return;
    }
    const { worker } = live;
    let timeoutMs: number;
    try {
      timeoutMs = this.options.timeoutMs();
    } catch (error) {
      // A limit that cannot be read (a malformed setting) fails this task; thrown past here it left the
      // lane busy for good, the task and every later one unsettled, and the rejection unhandled.
      this.finish(() => job.reject(error as Error));
      return;
    }
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      job.signal?.removeEventListener("abort", stop);
      live.onReply = undefined;
      live.onEnd = undefined;
      this.finish(done);
    };
    live.onReply = (reply) => {
      if (reply.id !== job.message.id) return;
      worker.unref();
      settle(() => (reply.error !== undefined ? job.reject(new Error(reply.error)) : job.resolve(reply)));
    };
    live.onEnd = (error) => settle(() => job.reject(error));
    const timer = setTimeout(() => live.end(this.options.timedOut(timeoutMs)), timeoutMs);
    const stop = () => live.end(job.givenUp());
    job.signal?.addEventListener("abort", stop, { once: true });
    worker.ref();
    try {
      worker.postMessage(job.message, job.transfer);
    } catch (error) {
      // A message that cannot be cloned (or a bad transfer list) never reached the worker, which stays
      // fit for the next task; thrown past here it went unhandled and the task waited out its time limit.
      worker.unref();
      settle(() => job.reject(error as Error));
    }
  }

  private finish(done: () => void): void {
    this.busy = false;
    done();
    void this.next();
  }

  private spawn(): Live<Reply> {
    const workerOptions = this.options.workerOptions?.();
    const worker = new Worker(this.options.script, workerOptions);
    let resolveReady!: () => void;
    let rejectReady!: (error: Error) => void;
    const ready = new Promise<void>((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    // Whoever awaits it hears the failure; a worker started for no one must not be an unhandled rejection.
    ready.catch(() => {});
    const live: Live<Reply> = {
      worker,
      ready,
      loaded: false,
      ended: false,
      end: (error) => {
        if (live.ended) return;
        live.ended = true;
        // Only this worker's slot: a replacement may already be starting.
        if (this.live === live) this.live = undefined;
        // Counted before the task hears of it: its settling starts the next task, which waits for this exit.
        const exit: Promise<unknown> = worker
          .terminate()
          .catch(() => undefined)
          .finally(() => this.exiting.delete(exit));
        this.exiting.add(exit);
        if (!live.loaded) rejectReady(error);
        live.onEnd?.(error);
      },
    };
    worker.on("message", (reply: Reply) => {
      if (live.loaded) {
        live.onReply?.(reply);
      } else if (reply.ready) {
        live.loaded = true;
        worker.unref();
        resolveReady();
      } else {
        live.end(this.options.loadFailed(reply));
      }
    });
    // 'error' comes before 'exit': the task fails with the error's reason, not the bare exit.
    worker.on("error", (error: Error & { code?: string }) => live.end(this.options.crashed(error, workerOptions)));
    worker.on("exit", (code) => live.end(this.options.exited(code, live.loaded)));
    this.live = live;
    return live;
  }
}

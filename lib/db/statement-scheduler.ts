export interface StatementSchedulerOptions {
  /** Share of the connection's time background work may take while foreground work is arriving (0 < share ≤ 1). */
  backgroundShare: number;
  /** Foreground counts as arriving for this long after its last statement. */
  foregroundWindowMs: number;
  /** After a foreground statement, background waits this long for the same request's next statement. */
  lingerMs: number;
  /** A background turn that has waited this long goes next whatever else is queued (no starvation). */
  maxBackgroundWaitMs: number;
}

interface Waiter {
  since: number;
  grant(): void;
}

/**
 * Turns on the embedded database's single connection, in priority order. PGlite runs one statement
 * or transaction at a time in arrival order, so a request's statement used to queue behind every
 * chunk write the pipeline had already queued. Here foreground turns (requests) always go before
 * queued background turns (the pipeline); once a request's statement finished, background waits a
 * moment for that request's next one; and while requests keep arriving, background work may use at
 * most `backgroundShare` of the connection's time (after a background turn of d ms the connection
 * stays free for d·(1/share − 1) ms for requests). When no request arrived for a while the
 * pipeline runs back to back. A request waits at most for the one background turn already running,
 * which is why the pipeline keeps its transactions short.
 */
export class StatementScheduler {
  private busy = false;
  private readonly foreground: Waiter[] = [];
  private readonly background: Waiter[] = [];
  private lastForegroundEnd = -Infinity;
  private backgroundNotBefore = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  /** Turns run and the connection time background work used (tests, benchmarks). */
  readonly stats = { foregroundTurns: 0, backgroundTurns: 0, backgroundMs: 0 };

  constructor(private readonly options: StatementSchedulerOptions) {}

  /** Runs `fn` when it is this kind of work's turn; nothing else runs on the connection meanwhile. */
  async run<T>(background: boolean, fn: () => Promise<T>): Promise<T> {
    const now = performance.now();
    const queue = background ? this.background : this.foreground;
    if (!this.busy && queue.length === 0 && (!background || (this.foreground.length === 0 && this.backgroundStartAt() <= now))) {
      this.busy = true;
    } else {
      // `grant` marks the connection busy before the waiter resumes, so nothing slips in between.
      const granted = new Promise<void>((resolve) => queue.push({ since: now, grant: resolve }));
      // An idle connection that is holding back for requests: schedule this turn's start.
      if (!this.busy) this.dispatch();
      await granted;
    }
    const started = performance.now();
    try {
      return await fn();
    } finally {
      const ended = performance.now();
      if (background) {
        const took = ended - started;
        this.stats.backgroundTurns++;
        this.stats.backgroundMs += took;
        const requestsArriving = ended - this.lastForegroundEnd < this.options.foregroundWindowMs;
        this.backgroundNotBefore = requestsArriving ? ended + took * (1 / this.options.backgroundShare - 1) : ended;
      } else {
        this.stats.foregroundTurns++;
        this.lastForegroundEnd = ended;
      }
      this.busy = false;
      this.dispatch();
    }
  }

  /** Waiting turns (tests). */
  get waiting(): { foreground: number; background: number } {
    return { foreground: this.foreground.length, background: this.background.length };
  }

  private backgroundStartAt(): number {
    return Math.max(this.lastForegroundEnd + this.options.lingerMs, this.backgroundNotBefore);
  }

  private dispatch(): void {
    if (this.busy) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = performance.now();
    const oldest = this.background[0];
    const starved = oldest !== undefined && now - oldest.since >= this.options.maxBackgroundWaitMs;
    const next = starved ? undefined : this.foreground.shift();
    if (next) return this.grant(next);
    if (!oldest) return;
    const startAt = Math.min(this.backgroundStartAt(), oldest.since + this.options.maxBackgroundWaitMs);
    if (startAt <= now) return this.grant(this.background.shift()!);
    this.timer = setTimeout(() => this.dispatch(), Math.max(1, Math.ceil(startAt - now)));
  }

  private grant(waiter: Waiter): void {
    this.busy = true;
    waiter.grant();
  }
}

interface PeriodicTask {
  timer: NodeJS.Timeout;
  /** The run in progress, if any. */
  running?: Promise<void>;
}

const globalForPeriodic = globalThis as unknown as { __engramPeriodic?: Map<string, PeriodicTask> };

/**
 * Runs `task` now and every `everyMs` for the life of the process, once per name (a second start in
 * the same process, or a module loaded twice by the bundler, does not double it). A failed run is
 * logged as `[engram] <name> failed` and the next goes on; the timer never keeps the process alive.
 * A tick that comes while the previous run is still going is skipped: a prune waiting behind a
 * stalled lock was joined by another every tick, each holding a connection, until the pool was gone.
 */
export function runPeriodically(name: string, everyMs: number, task: () => Promise<unknown>): void {
  const tasks = (globalForPeriodic.__engramPeriodic ??= new Map());
  if (tasks.has(name)) return;
  const entry: PeriodicTask = { timer: setInterval(() => run(), everyMs) };
  const run = () => {
    if (entry.running) return;
    entry.running = task()
      .then(
        () => undefined,
        (error: unknown) => console.error(`[engram] ${name} failed`, error),
      )
      .finally(() => {
        entry.running = undefined;
      });
  };
  entry.timer.unref();
  tasks.set(name, entry);
  run();
}

/** Ends every periodic task: no run starts after this. */
export async function stopPeriodicTasks(): Promise<void> {
  const tasks = globalForPeriodic.__engramPeriodic;
  if (!tasks) return;
  for (const { timer } of tasks.values()) clearInterval(timer);
  tasks.clear();
}

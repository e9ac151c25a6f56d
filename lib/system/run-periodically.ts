interface PeriodicTask {
  timer: NodeJS.Timeout;
  /** The run in progress, if any. */
  running?: Promise<void>;
}

const globalForPeriodic = globalThis as unknown as { __engramPeriodic?: Map<string, PeriodicTask> };

/**
 * Runs `task` now (unless `runAtStart: false`) and every `everyMs` for the life of the process, once per name (a second start in
 * the same process, or a module loaded twice by the bundler, does not double it). A failed run is
 * logged as `[engram] <name> failed` and the next goes on; the timer never keeps the process alive.
 * A tick that comes while the previous run is still going is skipped: a prune waiting behind a
 * stalled lock was joined by another every tick, each holding a connection, until the pool was gone.
 */
export function runPeriodically(name: string, everyMs: number, task: () => Promise<unknown>, options: { runAtStart?: boolean } = {}): void {
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
  if (options.runAtStart !== false) run();
}

/**
 * Ends every periodic task (a graceful stop, before the database closes): no run starts after this,
 * and the runs in progress get up to `waitMs` to finish. Without the wait a prune between two batches
 * found the database closed under it and failed.
 */
export async function stopPeriodicTasks(waitMs = 0): Promise<void> {
  const tasks = globalForPeriodic.__engramPeriodic;
  if (!tasks) return;
  const running = [...tasks.values()].map((task) => {
    clearInterval(task.timer);
    return task.running;
  });
  tasks.clear();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(running), new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
  clearTimeout(timer);
}

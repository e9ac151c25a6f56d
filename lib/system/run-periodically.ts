const globalForPeriodic = globalThis as unknown as { __engramPeriodic?: Map<string, NodeJS.Timeout> };

/**
 * Runs `task` now and every `everyMs` for the life of the process, once per name (a second start in
 * the same process, or a module loaded twice by the bundler, does not double it). A failed run is
 * logged as `[engram] <name> failed` and the next goes on; the timer never keeps the process alive.
 */
export function runPeriodically(name: string, everyMs: number, task: () => Promise<unknown>): void {
  const timers = (globalForPeriodic.__engramPeriodic ??= new Map());
  if (timers.has(name)) return;
  const run = () => void task().catch((error: unknown) => console.error(`[engram] ${name} failed`, error));
  const timer = setInterval(run, everyMs);
  timer.unref();
  timers.set(name, timer);
  run();
}

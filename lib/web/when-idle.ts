/**
 * Runs `task` once the page has painted and the main thread is idle (at most `timeoutMs` later);
 * returns a cancel function. Secondary work (the live-event stream, the bell's count) waits for
 * this so it does not compete with the first content for the browser's thread or the server's.
 */
export function whenIdle(task: () => void, timeoutMs = 1500): () => void {
  if (typeof window.requestIdleCallback === "function") {
    const handle = window.requestIdleCallback(task, { timeout: timeoutMs });
    return () => window.cancelIdleCallback(handle);
  }
  const handle = window.setTimeout(task, 300);
  return () => window.clearTimeout(handle);
}

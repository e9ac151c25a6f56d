/**
 * The whole seconds a 429's Retry-After (and `details.retry_after`) gives for `ms` until room comes
 * back: rounded up, so a client that waits exactly that long is not refused again, and never 0.
 */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

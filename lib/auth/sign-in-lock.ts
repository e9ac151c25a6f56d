/** The first lock past the free failures; each further failure doubles it. */
export const BASE_LOCK_MS = 30_000;
export const MAX_LOCK_MS = 15 * 60_000;

/**
 * The lock after the `failures`-th failure: none before `free` of them, then 30 s doubling to 15 min.
 * Every store computes it where it counts (in SQL, in a Redis script), so a count and its lock are
 * written together.
 */
export function lockMs(failures: number, free: number): number {
  if (failures < free) return 0;
  return Math.min(MAX_LOCK_MS, BASE_LOCK_MS * 2 ** Math.min(failures - free, 20));
}

import type { DbClient } from "@/lib/db/database.ts";

/**
 * The updated_at of a write to a memory row: strictly later than the row's. A PATCH writes only if
 * updated_at is still the one it read, so every write must move it forward: one that wrote the clock's
 * now could write back the very value the PATCH read (the same millisecond, or a row an edit burst ran
 * ahead of the clock), and the PATCH then went through on its stale read. In SQL:
 * `GREATEST(now, updated_at + interval '1 millisecond')`.
 */
export function nextUpdatedAt(stored: Date, now: Date): Date {
  return new Date(Math.max(now.getTime(), stored.getTime() + 1));
}

/**
 * Moves the updated_at of memories a write just changed forward, as nextUpdatedAt does, for writes made
 * with updateMany (which can only set a value, not compute one from the row): call it in the same
 * transaction, after the write, for the rows it changed.
 */
export async function touchMemories(tx: DbClient, ids: string[], now: Date): Promise<void> {
  if (ids.length === 0) return;
  await tx.$executeRaw`UPDATE memories SET updated_at = GREATEST(${now}, updated_at + interval '1 millisecond') WHERE id = ANY(${ids}::uuid[])`;
}

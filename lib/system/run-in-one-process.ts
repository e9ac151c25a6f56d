import type { Database } from "@/lib/db/database.ts";

/**
 * Runs a periodic task (a prune) in one server process at a time: with several processes on one
 * PostgreSQL database, every process ran every prune, each reading and deleting the same rows
 * (and each waiting behind the same stalled row lock). The process holding the task's session lock
 * runs it; the others skip their tick and get `skipped`. A session lock, not one per batch: the
 * whole run is one process's, and its batches stay short transactions on any pool connection.
 */
export async function runInOneProcess<T>(database: Database, name: string, task: () => Promise<T>, skipped: T): Promise<T> {
  if (!database.withSessionLock) return task();
  const result = await database.withSessionLock(`engram periodic: ${name}`, task);
  return result.ran ? result.value : skipped;
}

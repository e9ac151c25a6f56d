import type { Database } from "@/lib/db/database.ts";

/**
 * Characters the embedded database handed back to requests (background work not counted) while `fn`
 * ran: how much a request reads, seen at PGlite's statement queue. PostgreSQL has no such queue, so
 * tests that measure this skip there (`it.skipIf(testPostgres())`).
 */
export async function charactersRead(database: Database, fn: () => Promise<void>): Promise<number> {
  const scheduler = database.scheduler;
  if (!scheduler) throw new Error("charactersRead needs the embedded database (PGlite's statement queue)");
  const run = scheduler.run.bind(scheduler);
  let read = 0;
  scheduler.run = async (background, statement) => {
    const result = await run(background, statement);
    if (!background) read += JSON.stringify(result ?? null).length;
    return result;
  };
  try {
    await fn();
  } finally {
    scheduler.run = run;
  }
  return read;
}

import type { DbClient } from "./database.ts";

/**
 * The database's clock, to the millisecond its timestamps keep. For a time compared with times the
 * database stamps itself (events.created_at is its clock_timestamp()): an app host's clock may run
 * ahead of or behind the database's, and a comparison across the two is off by that much.
 */
export async function databaseNow(db: DbClient): Promise<Date> {
  const [row] = await db.$queryRaw<{ now: Date }[]>`SELECT date_trunc('milliseconds', clock_timestamp()) AS now`;
  return row!.now;
}

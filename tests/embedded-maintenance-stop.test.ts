import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { setDatabase } from "@/lib/db/database.ts";
import { noteTableWrites, startEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { stopPeriodicTasks } from "@/lib/system/run-periodically.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { createHarness, openTestDatabase, type Harness } from "./support/harness.ts";

// The embedded database's vacuum pass (every 10 minutes) and statistics check (every 15 s and after
// bursts of writes) as the server runs them: one pass at a time, and none after a graceful stop.
let h: Harness;
beforeAll(async () => {
  h = await createHarness({ embedded: true });
});
afterAll(async () => {
  vi.useRealTimers();
  await stopPeriodicTasks();
  await h.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const vacuums = async (sql: Harness["database"]["sql"], table: string) => {
  await sql.exec(`SELECT pg_stat_force_next_flush()`);
  return (await sql.query<{ n: number }>(`SELECT vacuum_count::int AS n FROM pg_stat_user_tables WHERE relname = $1`, [table]))[0]!.n;
};

describe("embedded database maintenance timers", () => {
  // Last in this file: the stop closes the process-wide database.
  test("a vacuum tick while a pass is running is skipped, and no pass or check runs after a graceful stop", async () => {
    const database = await openTestDatabase();
    setDatabase(database);
    const errors = vi.spyOn(console, "error");
    // Only the timers' intervals are simulated: the database's own work runs on the real clock.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      await database.sql.exec(
        `INSERT INTO events (id, type, created_at) SELECT gen_random_uuid(), 'memory.created', now() FROM generate_series(1, 1000)`,
      );
      await database.sql.exec(`DELETE FROM events`);
      startEmbeddedMaintenance(database);
      // Nothing at start: the first pass comes after the interval, as before.
      await sleep(200);
      expect(await vacuums(database.sql, "events")).toBe(0);
      // Two ticks in a row, the first pass still reading which tables are due: one pass.
      vi.advanceTimersByTime(10 * 60_000);
      vi.advanceTimersByTime(10 * 60_000);
      await sleep(500);
      expect(await vacuums(database.sql, "events")).toBe(1);

      // Enough writes for a statistics check 500 ms later, then a stop before it comes.
      noteTableWrites(1_000);
      await stopServer({ graceMs: 2_000 });
      vi.advanceTimersByTime(60 * 60_000);
      await sleep(800);
      const failures = errors.mock.calls.map((call) => String(call[0])).filter((message) => message.startsWith("[engram] database"));
      expect(failures).toEqual([]);
    } finally {
      vi.useRealTimers();
      errors.mockRestore();
      setDatabase(h.database);
    }
  });
});

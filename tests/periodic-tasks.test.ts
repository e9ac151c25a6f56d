import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import pg from "pg";
import { pruneEvents } from "@/lib/events/prune-events.ts";
import { newRandomId } from "@/lib/ids.ts";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { runPeriodically, stopPeriodicTasks } from "@/lib/system/run-periodically.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { createHarness, openTestDatabase, testPostgres, type Harness } from "./support/harness.ts";

/** The periodic prunes (events, mail outbox, OAuth clients, …) as lib/system/run-periodically.ts runs them. */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await stopPeriodicTasks();
  await h.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("runPeriodically", () => {
  it("starts no run while the previous one is still going: a slow run is not joined by another every tick", async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    runPeriodically("test: slow task", 10, async () => {
      runs++;
      most = Math.max(most, ++running);
      await gate;
      running--;
    });
    try {
      await sleep(120);
      expect([runs, most]).toEqual([1, 1]);
      release();
      // Once it ended, the next tick runs it again.
      await sleep(60);
      expect(runs).toBeGreaterThan(1);
      expect(most).toBe(1);
    } finally {
      release();
      await stopPeriodicTasks();
    }
  });

  it.skipIf(!testPostgres())("a prune stuck behind a row lock holds one connection, not one more every tick until the pool is gone", async () => {
    const ann = await h.user("Ann");
    const id = newRandomId();
    await h.db.event.create({ data: { id, type: "memory.created", createdAt: new Date(Date.now() - 3 * 24 * 3_600_000) } });
    const side = new pg.Client({ connectionString: h.url! });
    const watcher = new pg.Client({ connectionString: h.url! });
    await side.connect();
    await watcher.connect();
    // Sessions of this test database waiting for a lock (behind the held row or behind each other).
    const waiting = async () =>
      (await watcher.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0].n as number;
    try {
      // A transaction stalled half-way with the old event locked: the prune's DELETE waits for it.
      await side.query("BEGIN");
      await side.query("SELECT id FROM events WHERE id = $1 FOR UPDATE", [id]);
      runPeriodically("test: events prune behind a lock", 20, () => pruneEvents(h.database));
      await sleep(400);
      expect(await waiting()).toBe(1);
      // The rest of the pool still serves requests.
      const me = await Promise.race([ann.get("/v1/auth/me").then((res) => res.status), sleep(5_000).then(() => "no connection in 5 s")]);
      expect(me).toBe(200);
    } finally {
      await side.query("ROLLBACK");
      await side.end();
      await watcher.end();
      await stopPeriodicTasks();
    }
    await sleep(100);
    expect(await h.db.event.count({ where: { id } })).toBe(0);
  });
});

describe("several server processes on one PostgreSQL database", () => {
  it.skipIf(!testPostgres())("prune without a session lock: a lock left held by another backend (a transaction-mode pooler) does not stop them, and two processes' runs both finish", async () => {
    // A second server process: its own pool on the same database.
    const other = await openDatabase({ url: h.url!, migrate: false });
    const old = new Date(Date.now() - 3 * 24 * 3_600_000);
    const seed = async (n: number) => {
      await h.db.event.createMany({ data: Array.from({ length: n }, () => ({ id: newRandomId(), type: "memory.created", createdAt: old })) });
    };
    // Behind a transaction-mode pooler a session lock's unlock can run on another backend, so the
    // lock stays with a backend that never gives it back; a prune guarded by it would skip for good.
    const leaked = new pg.Client({ connectionString: h.url! });
    await leaked.connect();
    try {
      await leaked.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", ["engram periodic: events: prune"]);
      await seed(3);
      expect(await pruneEvents(h.database)).toBe(3);
      // Two processes at once: the prunes delete by id, so both runs finish and every old row is gone.
      await seed(4);
      const [a, b] = await Promise.all([pruneEvents(h.database), pruneEvents(other)]);
      expect(a + b).toBeGreaterThanOrEqual(4);
      expect(await h.db.event.count({ where: { createdAt: old } })).toBe(0);
    } finally {
      await leaked.end();
      await other.close();
    }
  });
});

describe("a graceful stop", () => {
  // Last in this file: the stop closes the process-wide database and stops the background work.
  it("lets a prune in progress finish before the database closes, and starts none after", async () => {
    const database = await openTestDatabase();
    setDatabase(database);
    const errors = vi.spyOn(console, "error");
    let runs = 0;
    let counted: number | undefined;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    runPeriodically("test: prune during a stop", 20, async () => {
      runs++;
      // A batch done, the next one still to come when the stop begins.
      await database.prisma.event.count();
      await gate;
      counted = await database.prisma.event.count();
    });
    await sleep(50);
    expect(runs).toBe(1);
    setTimeout(release, 200);
    try {
      await stopServer({ graceMs: 5_000 });
      expect(counted).toBe(0);
      expect(errors.mock.calls.map((call) => String(call[0]))).not.toContain("[engram] test: prune during a stop failed");
      await sleep(100);
      expect(runs).toBe(1);
      expect(errors.mock.calls.map((call) => String(call[0]))).not.toContain("[engram] test: prune during a stop failed");
    } finally {
      release();
      errors.mockRestore();
      await stopPeriodicTasks();
      setDatabase(h.database);
    }
  });
});

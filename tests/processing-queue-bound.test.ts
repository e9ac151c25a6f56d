import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { EmbeddedRunner, MAX_QUEUED_JOBS } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { backdateMemories } from "./support/backdate-memories.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h.close();
});

const runner = (options: { maxQueued?: number; exclusiveDatabase?: boolean; db?: () => Promise<Harness["db"]> } = {}) =>
  new EmbeddedRunner({ ...processingConfig(), concurrency: 1, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite", ...options });

describe("the embedded runner's queue (a process that runs for weeks)", () => {
  it("holds at most MAX_QUEUED_JOBS ids however many writes come faster than it works", () => {
    // Every memory write enqueued its id: a bulk import faster than the model kept them all in memory.
    const r = runner();
    try {
      for (let i = 0; i < MAX_QUEUED_JOBS * 2; i++) r.enqueue(randomUUID());
      expect(r.size.queued).toBeLessThanOrEqual(MAX_QUEUED_JOBS);
    } finally {
      r.stop();
    }
  });

  it("a write enqueued past the bound is left to a sweep, which still processes it", async () => {
    const id = (await ann.post("/v1/memories", { content: "The on-call rotation hands over every Monday at nine." })).body.data.id;
    const r = runner({ maxQueued: 5 });
    try {
      for (let i = 0; i < 20; i++) r.enqueue(randomUUID());
      r.enqueue(id);
      expect(r.size.queued).toBeLessThanOrEqual(5);
      const deadline = Date.now() + 30_000;
      while ((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus !== "done" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus).toBe("done");
    } finally {
      r.stop();
    }
  });

  it("memories left to the database past the bound are not starved by a steady stream of newer writes (oldest first)", async () => {
    // The queue only refilled from the database once it was empty; new writes kept it from emptying, so
    // the memories written while it was full waited for as long as the writes went on.
    const push = async (content: string) => (await ann.post("/v1/memories", { content })).body.data.id as string;
    const r = runner({ maxQueued: 5 });
    const status = async (ids: string[]) =>
      (await h.db.memory.findMany({ where: { id: { in: ids } }, select: { processingStatus: true } })).map((row) => row.processingStatus);
    try {
      for (let i = 0; i < 5; i++) r.enqueue(await push(`Filler note ${i} about the staging cluster's weekly restart.`));
      const left: string[] = [];
      for (let i = 0; i < 3; i++) left.push(await push(`Backlog note ${i}: the warehouse door code changes on the first of the month.`));
      for (const id of left) r.enqueue(id);
      expect(r.size.queued).toBeLessThanOrEqual(5);
      // A steady stream of newer writes, faster than one worker processes them, for up to 40 s.
      const deadline = Date.now() + 40_000;
      let written = 0;
      while (Date.now() < deadline && (await status(left)).some((s) => s !== "done")) {
        r.enqueue(await push(`Stream note ${written++}: ticket ${randomUUID()} was triaged.`));
        expect(r.size.queued).toBeLessThanOrEqual(5 + 200);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await status(left)).toEqual(["done", "done", "done"]);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 90_000);

  it("a job orphaned by a killed process is taken over by the next sweep even while 200 or more ids are queued, the queue still bounded", async () => {
    // Issue 16: another process on the same database was killed mid-job. Sweeps were skipped while this
    // process had a page (200) or more queued, so the orphan waited until its queue drained below that.
    const id = (await ann.post("/v1/memories", { content: "The backup tapes go offsite every Friday." })).body.data.id;
    await backdateMemories(h.db, id, { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000) });
    // Each job waits 200 ms for its database handle, so the 250 queued ids (with no row) take 50 s to work
    // through: the orphan is done in time only if the sweep put it ahead of them, not once they drained
    // below a page and a refill read it (with instant jobs, that came within the deadline anyway).
    const slowDb = async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return h.db;
    };
    const r = runner({ maxQueued: 250, exclusiveDatabase: false, db: slowDb });
    try {
      for (let i = 0; i < 251; i++) r.enqueue(randomUUID());
      expect(r.size.queued).toBe(250);
      await r.sweep();
      expect(r.size.queued).toBeLessThanOrEqual(250);
      const deadline = Date.now() + 25_000;
      while ((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus !== "done" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingAttempts: true } })).toEqual({ processingStatus: "done", processingAttempts: 2 });
      // Taken ahead of the queue: nearly all of it still waits.
      expect(r.size.queued).toBeGreaterThan(150);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 60_000);

  it("orphans a sweep puts ahead of the queue never take it past a small bound", async () => {
    // queueFirst made room only among the ids already queued: more orphans than the bound were all queued.
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await ann.post("/v1/memories", { content: `Orphan ${i}: the fire drill is on the third Tuesday.` })).body.data.id);
    await backdateMemories(h.db, ids, { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000) });
    const slowDb = async () => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return h.db;
    };
    const r = runner({ maxQueued: 3, exclusiveDatabase: false, db: slowDb });
    try {
      await r.sweep();
      expect(r.size.queued).toBeLessThanOrEqual(3);
      // The ones left out are still running rows with a dead worker: a later sweep takes them.
      const deadline = Date.now() + 40_000;
      while ((await h.db.memory.count({ where: { id: { in: ids }, processingStatus: "done" } })) < ids.length && Date.now() < deadline) {
        await r.sweep();
        expect(r.size.queued).toBeLessThanOrEqual(3);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await h.db.memory.count({ where: { id: { in: ids }, processingStatus: "done" } })).toBe(ids.length);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 60_000);

  it("a job orphaned by a killed process goes ahead of a backlog of older pending memories, not behind it", async () => {
    // The sweep's page (200, oldest first) held the orphan only once the backlog before it was worked
    // through: behind 200 older memories it waited for all of them, however long the model took.
    const older: string[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const ids = await Promise.all(Array.from({ length: 21 }, (_, i) => ann.post("/v1/memories", { content: `Backlog item ${batch}-${i}: shelf ${randomUUID()} restocked.` })));
      older.push(...ids.map((res) => res.body.data.id as string));
    }
    const id = (await ann.post("/v1/memories", { content: "The generator is tested on the first Sunday of each month." })).body.data.id;
    await backdateMemories(h.db, id, { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000), updatedAt: new Date() });
    const r = runner({ exclusiveDatabase: false });
    try {
      r.start();
      const deadline = Date.now() + 60_000;
      while ((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus !== "done" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus).toBe("done");
      // One worker: taken first, it finished while nearly all of the backlog still waited.
      expect(await h.db.memory.count({ where: { id: { in: older }, processingStatus: "done" } })).toBeLessThan(20);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 120_000);
});

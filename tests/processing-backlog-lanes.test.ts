import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Memory, Prisma } from "@/lib/db/generated/client.ts";
import { EmbeddedRunner, type EmbeddedRunnerOptions } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * Past the queue's bound, a hub with nothing queued gets a place while the other writes wait in the
 * database. The backlog was read only once fewer than 100 ids were queued (and a sweep returned at 200):
 * with 200 hubs each keeping one id queued it was never read. And a hub's newest write took such a place
 * ahead of its own older rows waiting in the database.
 */

let h: Harness;
let ann: Client;
let template: Memory;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  const id = (await ann.post("/v1/memories", { content: "The template of every memory here." })).body.data.id as string;
  template = await h.db.memory.findUniqueOrThrow({ where: { id } });
  await h.db.memory.update({ where: { id }, data: { processingStatus: "done" } });
});
afterAll(async () => {
  await h.close();
});

let clock = Date.now();
/** Memories in Ann's hub, pending, each written after the one before. */
async function write(count: number, label: string): Promise<string[]> {
  const rows = Array.from({ length: count }, (_, i) => ({
    ...template,
    id: randomUUID(),
    content: `${label} ${i}: ticket ${randomUUID()} was triaged.`,
    contentHash: randomUUID(),
    processingStatus: "pending",
    updatedAt: new Date(++clock),
  }));
  await h.db.memory.createMany({ data: rows as Prisma.MemoryCreateManyInput[] });
  return rows.map((row) => row.id);
}

/**
 * Each of `lanes` keeps one memory queued, a new one written (and enqueued in that lane) once its last is
 * done, until `stop` says so or `maxJobs` of theirs are done.
 */
async function keepLanesBusy(r: EmbeddedRunner, lanes: string[], stop: () => Promise<boolean>, maxJobs: number): Promise<number> {
  const current = new Map<string, string>();
  const first = await write(lanes.length, "Lane");
  lanes.forEach((lane, i) => {
    current.set(lane, first[i]!);
    r.enqueue(first[i]!, lane);
  });
  let jobs = 0;
  while (jobs < maxJobs && !(await stop())) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const done = new Set((await h.db.memory.findMany({ where: { id: { in: [...current.values()] }, processingStatus: "done" }, select: { id: true } })).map((row) => row.id));
    const finished = lanes.filter((lane) => done.has(current.get(lane)!));
    if (finished.length === 0) continue;
    jobs += finished.length;
    const next = await write(finished.length, "Lane");
    finished.forEach((lane, i) => {
      current.set(lane, next[i]!);
      r.enqueue(next[i]!, lane);
    });
  }
  return jobs;
}

const lanes = (count: number, name: string) => Array.from({ length: count }, (_, i) => `${name}-${i}`);
const doneCount = async (ids: string[]) => h.db.memory.count({ where: { id: { in: ids }, processingStatus: "done" } });

describe("the embedded runner's backlog in the database", () => {
  it("is read while 200 hubs each keep one id queued past the bound", async () => {
    const options: EmbeddedRunnerOptions = { ...processingConfig(), concurrency: 1, maxQueued: 200, sweepMs: 600_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" };
    const r = new EmbeddedRunner(options);
    try {
      const backlog = await write(20, "Backlog");
      // 201 lanes: one running, 200 queued, the queue full; the backlog's writes wait in the database.
      const busy = keepLanesBusy(
        r,
        lanes(201, "starve"),
        async () => (await doneCount(backlog)) > 0,
        600,
      );
      while (r.size.queued < 200) await new Promise((resolve) => setTimeout(resolve, 5));
      for (const id of backlog) r.enqueue(id, ann.personalHubId);
      const jobs = await busy;
      // Served in turn with the 201 lanes, not never.
      expect(await doneCount(backlog)).toBeGreaterThan(0);
      expect(jobs).toBeLessThan(600);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 600_000);

  it("a hub's new write does not overtake its own older rows waiting there", async () => {
    const options: EmbeddedRunnerOptions = { ...processingConfig(), concurrency: 1, maxQueued: 110, sweepMs: 600_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" };
    const r = new EmbeddedRunner(options);
    try {
      const older = await write(2, "Older");
      let newer: string[] = [];
      const busy = keepLanesBusy(
        r,
        lanes(111, "overtake"),
        async () => newer.length > 0 && (await doneCount([...older, ...newer])) === older.length + newer.length,
        500,
      );
      while (r.size.queued < 100) await new Promise((resolve) => setTimeout(resolve, 5));
      // The queue full (for now, a bound of one): Ann's older rows wait in the database.
      options.maxQueued = 1;
      for (const id of older) r.enqueue(id, ann.personalHubId);
      // Room again (the bound raised), and Ann writes again while her older rows still wait there.
      options.maxQueued = 160;
      newer = await write(1, "Newer");
      r.enqueue(newer[0]!, ann.personalHubId);
      await busy;
      const started = await h.db.memory.findMany({ where: { id: { in: [...older, ...newer] } }, select: { id: true, processingStatus: true, processingStartedAt: true } });
      expect(started.every((row) => row.processingStatus === "done")).toBe(true);
      const newest = started.find((row) => row.id === newer[0])!.processingStartedAt!.getTime();
      for (const row of started.filter((row) => row.id !== newer[0])) expect(row.processingStartedAt!.getTime()).toBeLessThan(newest);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 600_000);
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { JobLease } from "@/lib/processing/job-lease.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * stop() ends the jobs in progress by aborting their leases' signals. A job that was still on its way
 * to its claim (waiting for the database) claimed the memory after the stop and was given a new lease,
 * never aborted: a stopped runner went on processing, renewing and writing, on a database being closed.
 */

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h?.close();
});

describe("the embedded runner's stop", () => {
  it("a job that had not claimed its memory yet when the runner stopped does not run", async () => {
    const id = (await ann.post("/v1/memories", { content: "The server room key is kept at the front desk." })).body.data.id as string;
    // The database is slow to hand out (a connection being opened): the job waits for it when the runner stops.
    let hand: () => void = () => {};
    const handed = new Promise<void>((resolve) => (hand = resolve));
    const r = new EmbeddedRunner({
      ...processingConfig(),
      sweepMs: 60_000,
      db: async () => {
        await handed;
        return h.db;
      },
      exclusiveDatabase: h.database.kind === "pglite",
    });
    r.enqueue(id);
    expect(r.size.active).toBe(1);
    r.stop();
    hand();
    await r.idle();
    expect(r.stats).toEqual({ done: 0, stale: 0, retried: 0, failed: 0 });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingAttempts: true } })).toEqual({
      processingStatus: "pending",
      processingAttempts: 0,
    });
  }, 30_000);

  it("a lease asked for after the stop (a claim that was on its way) is lost at once and never renewed", async () => {
    const id = (await ann.post("/v1/memories", { content: "The generator is tested on the first Monday of the month." })).body.data.id as string;
    const lease = new JobLease(async () => h.db, 300);
    lease.stop();
    const signal = lease.hold(id, 1, 1);
    expect(signal.aborted).toBe(true);
    await h.db.memory.updateMany({ where: { id }, data: { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(0) } });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStartedAt: true } })).processingStartedAt).toEqual(new Date(0));
    lease.release(id);
  }, 30_000);
});

import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { EmbeddedRunner, MAX_QUEUED_JOBS } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h.close();
});

const runner = (options: { maxQueued?: number } = {}) =>
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
});

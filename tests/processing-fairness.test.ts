import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { onMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});
afterAll(async () => {
  await h.close();
});

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("the embedded runner serves hubs in turn", () => {
  it("a memory pushed into one hub is processed long before another hub's 500-memory import ends", async () => {
    // The queue was one FIFO over every hub: a bulk import into one hub held every other hub's pushes
    // until the whole import had been processed.
    const first = (await ann.post("/v1/memories", { content: "Import 0: the staging cluster restarts on Sundays." })).body.data.id as string;
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: first } });
    const copies = Array.from({ length: 499 }, (_, i) => ({
      ...row,
      id: randomUUID(),
      content: `Import ${i + 1}: ticket ${randomUUID()} was triaged and closed.`,
      contentHash: randomUUID(),
      updatedAt: new Date(row.updatedAt.getTime() + i + 1),
    }));
    await h.db.memory.createMany({ data: copies as Prisma.MemoryCreateManyInput[] });
    const imported = [first, ...copies.map((copy) => copy.id)];
    const r = new EmbeddedRunner({ ...processingConfig(), concurrency: 2, sweepMs: 600_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    // As start-background-processing.ts feeds it: every write's memory, with its hub.
    const unsubscribe = onMemoryWrite((memory) => r.enqueue(memory.id, memory.hubId));
    try {
      for (const id of imported) r.enqueue(id, ann.personalHubId);
      expect(r.size.queued + r.size.active).toBe(500);
      const pushed = (await bob.post("/v1/memories", { content: "The loading dock closes at five on Fridays." })).body.data.id as string;
      await until("Bob's memory is done", async () => (await h.db.memory.findUniqueOrThrow({ where: { id: pushed } })).processingStatus === "done", 120_000);
      // Served in turn with Ann's import, not behind it: nearly all of the import still waits.
      expect(await h.db.memory.count({ where: { id: { in: imported }, processingStatus: "done" } })).toBeLessThan(50);
    } finally {
      unsubscribe();
      r.stop();
      await r.idle();
    }
  }, 180_000);

  it("a push into another hub is not left in the database behind one hub's import past the queue's bound", async () => {
    // Past the bound a write waits in the database, and sweeps page through it oldest first: every other
    // hub's push waited there until the whole import, however large, had been processed.
    const first = (await ann.post("/v1/memories", { content: "Backlog 0: the staging cluster restarts on Sundays." })).body.data.id as string;
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: first } });
    const copies = Array.from({ length: 59 }, (_, i) => ({
      ...row,
      id: randomUUID(),
      content: `Backlog ${i + 1}: invoice ${randomUUID()} was filed.`,
      contentHash: randomUUID(),
      updatedAt: new Date(row.updatedAt.getTime() + i + 1),
    }));
    await h.db.memory.createMany({ data: copies as Prisma.MemoryCreateManyInput[] });
    const imported = [first, ...copies.map((copy) => copy.id)];
    const r = new EmbeddedRunner({ ...processingConfig(), concurrency: 1, maxQueued: 20, sweepMs: 600_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    const unsubscribe = onMemoryWrite((memory) => r.enqueue(memory.id, memory.hubId));
    try {
      for (const id of imported) r.enqueue(id, ann.personalHubId);
      expect(r.size.queued + r.size.active).toBeLessThanOrEqual(21);
      const pushed = (await bob.post("/v1/memories", { content: "The mail room sorts parcels by floor." })).body.data.id as string;
      expect(r.size.queued).toBeLessThanOrEqual(20);
      await until("Bob's memory is done", async () => (await h.db.memory.findUniqueOrThrow({ where: { id: pushed } })).processingStatus === "done", 120_000);
      expect(await h.db.memory.count({ where: { id: { in: imported }, processingStatus: "done" } })).toBeLessThan(15);
      // Ann's import is still all processed: what made room waits in the database and a sweep reads it.
      await until("Ann's import is done", async () => (await h.db.memory.count({ where: { id: { in: imported }, processingStatus: "done" } })) === imported.length, 120_000);
    } finally {
      unsubscribe();
      r.stop();
      await r.idle();
    }
  }, 300_000);
});

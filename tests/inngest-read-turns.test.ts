import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { InngestTestEngine } from "@inngest/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MEMORY_PROCESS_EVENT } from "@/inngest/client.ts";
import { processMemoryFunction } from "@/inngest/functions.ts";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { extractMemoryText } from "@/lib/extraction/extract-memory-text.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/**
 * The process-memory function's extract step waits for the process's document turn (one read at a time)
 * inside its run, so it keeps one of the function's four concurrency slots meanwhile: "at most 4 runs at a
 * time" holds, and the runs queued behind it wait in Inngest's queue unclaimed, in order. A run that slept
 * between tries instead (step.sleep) gave its slot up, so Inngest started every queued run at once and each
 * claimed its memory. While it waits, the step renews its claim: renewed only as the step started, a wait
 * past the stale timeout let the sweep re-send the memory and a second run take it over.
 */

/** The embedded store, but the head of an object under `held/` answers only once the test lets it. */
class HeldStore extends LocalBlobStore {
  release!: () => void;
  private readonly released = new Promise<void>((resolve) => (this.release = resolve));
  override async head(key: string) {
    if (key.startsWith("held/")) await this.released;
    return super.head(key);
  }
}

let h: Harness;
let ann: Client;
let dir: string;
let store: HeldStore;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "engram-inngest-turns-"));
  store = new HeldStore(dir, async () => Buffer.alloc(32, 1));
  setBlobStore(store);
  await store.write("held/slow.txt", Buffer.from("A file whose store is slow to answer."), "text/plain");
  await store.write("fast/notes.txt", Buffer.from("Deploys go out on Tuesdays after the standup."), "text/plain");
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  store.release();
  setBlobStore(undefined);
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

const fileRef = (key: string) => ({ object_key: key, filename: path.basename(key), content_type: "text/plain", size_bytes: 64 });

async function fileMemory(key: string): Promise<string> {
  const id = (await ann.post("/v1/memories", { content: "A note on the file." })).body.data.id as string;
  await h.db.memory.update({ where: { id }, data: { fileRef: fileRef(key) as Prisma.InputJsonValue, extractedAt: null } });
  return id;
}

describe("the process-memory function and the process's document turn", () => {
  it("a run that cannot have the document turn waits for it inside its step, renewing its claim, and never sleeps", async () => {
    const stale = process.env.ENGRAM_PROCESSING_STALE_SECONDS;
    process.env.ENGRAM_PROCESSING_STALE_SECONDS = "1";
    // Another read holds the document turn (this process's one reader) until the store answers.
    const heldId = await fileMemory("held/slow.txt");
    const holding = extractMemoryText(await h.db.memory.findUniqueOrThrow({ where: { id: heldId } }));
    const id = await fileMemory("fast/notes.txt");
    const sleeps: string[] = [];
    const run = new InngestTestEngine({
      function: processMemoryFunction,
      events: [{ name: MEMORY_PROCESS_EVENT, data: { id } }],
      // Were the run to sleep between tries, each sleep would end at once here and be counted.
      steps: Array.from({ length: 60 }, (_, i) => ({ id: `wait-for-read-turn-${i + 1}`, handler: () => void sleeps.push(`wait-for-read-turn-${i + 1}`) })),
    }).execute();
    try {
      let startedAt: Date | null = null;
      for (let i = 0; i < 100 && startedAt === null; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        const row = await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingStartedAt: true } });
        if (row.processingStatus === "running") startedAt = row.processingStartedAt;
      }
      expect(startedAt).not.toBeNull();
      // Three stale timeouts' worth of waiting: the run is still in its step, and its claim is fresh.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const waiting = await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingStartedAt: true, processingAttempts: true } });
      expect(waiting.processingStatus).toBe("running");
      expect(waiting.processingAttempts).toBe(1);
      expect(Date.now() - waiting.processingStartedAt!.getTime()).toBeLessThan(1_000);
      expect(sleeps).toEqual([]);
      store.release();
      await holding;
      expect((await run).result).toEqual({ status: "done" });
      expect(sleeps).toEqual([]);
      expect(await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, content: true } })).toEqual({
        processingStatus: "done",
        content: "A note on the file.\n\nDeploys go out on Tuesdays after the standup.",
      });
    } finally {
      if (stale === undefined) delete process.env.ENGRAM_PROCESSING_STALE_SECONDS;
      else process.env.ENGRAM_PROCESSING_STALE_SECONDS = stale;
      store.release();
      await holding;
      await run.catch(() => undefined);
    }
  }, 60_000);
});

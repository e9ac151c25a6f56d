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
 * The process-memory function's extract step waited for the process's document turn (one read at a time)
 * inside its run: each run waiting so held one of the function's four concurrency slots (and an open
 * request) for as long as the reads ahead of it took. A run that cannot have the turn now ends its step
 * and sleeps between tries (step.sleep), holding nothing.
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
  it("a run that cannot have the document turn sleeps between tries instead of waiting for it inside its step", async () => {
    // Another read holds the document turn (this process's one reader) until the store answers.
    const heldId = await fileMemory("held/slow.txt");
    const holding = extractMemoryText(await h.db.memory.findUniqueOrThrow({ where: { id: heldId } }));
    const id = await fileMemory("fast/notes.txt");
    const sleeps: string[] = [];
    // A sleep is Inngest's to time: here each ends once the read ahead has (its next try then takes the turn).
    const run = new InngestTestEngine({
      function: processMemoryFunction,
      events: [{ name: MEMORY_PROCESS_EVENT, data: { id } }],
      steps: Array.from({ length: 60 }, (_, i) => ({
        id: `wait-for-read-turn-${i + 1}`,
        handler: async () => {
          sleeps.push(`wait-for-read-turn-${i + 1}`);
          store.release();
          await holding;
        },
      })),
    }).execute();
    try {
      const settled = await Promise.race([run.then(() => "ran"), new Promise((resolve) => setTimeout(() => resolve("still waiting in its step"), 5_000))]);
      expect(settled).toBe("ran");
      expect((await run).result).toEqual({ status: "done" });
      expect(sleeps).toEqual(["wait-for-read-turn-1"]);
      expect(await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, content: true } })).toEqual({
        processingStatus: "done",
        content: "A note on the file.\n\nDeploys go out on Tuesdays after the standup.",
      });
    } finally {
      store.release();
      await holding;
      await run.catch(() => undefined);
    }
  }, 60_000);
});

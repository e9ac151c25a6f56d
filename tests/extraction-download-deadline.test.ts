import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { extractMemoryText } from "@/lib/extraction/extract-memory-text.ts";
import { EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";
import { TricklingStore } from "./support/trickling-store.ts";

/**
 * A document's download from storage runs in the documents' one turn. A store that kept trickling held
 * it for up to ~12 minutes (ten times ENGRAM_EXTRACT_TIMEOUT_MS plus a second per 64 KiB), and a job
 * whose lease was lost mid-download held it as long. Now the download stops at
 * ENGRAM_EXTRACT_DOWNLOAD_MAX_MS, with a processing_error saying so, and at once when the lease is lost.
 */


let h: Harness;
let ann: Client;
let dir: string;
let store: TricklingStore;
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "engram-download-deadline-"));
  store = new TricklingStore(dir);
  setBlobStore(store);
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  process.env = saved;
  setBlobStore(undefined);
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A text file memory; its bytes trickle from storage once created when `trickle`. */
async function fileMemory(text: string, trickle: boolean): Promise<string> {
  const bytes = Buffer.from(text);
  const intent = (await ann.post("/v1/uploads", { filename: "notes.txt", content_type: "text/plain", size_bytes: bytes.length })).body.data;
  expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes) }))).status).toBe(200);
  const created = await ann.post("/v1/memories", { file_ref: intent.file_ref });
  expect(created.status).toBe(201);
  if (trickle) store.trickling.add(intent.file_ref.object_key);
  return created.body.data.id;
}

const row = (id: string) => h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true, processingError: true, processingAttempts: true } });

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("a document's download in the documents' turn", () => {
  it("is stopped at ENGRAM_EXTRACT_DOWNLOAD_MAX_MS: the memory says why in processing_error and the next document is read", async () => {
    process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS = "1500";
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const r = new EmbeddedRunner({ ...processingConfig(), maxAttempts: 1, concurrency: 2, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      const slow = await fileMemory("Quarterly numbers, sent by a very slow bucket.", true);
      const next = await fileMemory("The standup moves to 9:30 on Wednesdays.", false);
      r.enqueue(slow);
      r.enqueue(next);
      // At the default ENGRAM_EXTRACT_TIMEOUT_MS (30 s) the trickle held the turn for 301 s.
      await until("both are processed", async () => ["done", "failed"].includes((await row(slow)).processingStatus) && (await row(next)).processingStatus === "done", 25_000);
      expect((await row(slow)).processingError).toMatch(/^The file could not be read from storage in time: its download took longer than 1\.5 s/);
      expect((await ann.get(`/v1/memories/${slow}`)).body.data.state).toBe("active");
      expect(store.closed).toBe(store.reads);
    } finally {
      errors.mockRestore();
      delete process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS;
      r.stop();
      await r.idle();
    }
  }, 60_000);

  it("stops at once when the job's lease is lost (another process took the memory over), freeing the turn", async () => {
    const r = new EmbeddedRunner({ ...processingConfig(), leaseMs: 600, concurrency: 2, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: false });
    try {
      const slow = await fileMemory("Minutes of the planning meeting, from a very slow bucket.", true);
      const next = await fileMemory("Payroll closes on the 25th.", false);
      const readsBefore = store.reads;
      r.enqueue(slow);
      await until("the download started", async () => store.reads > readsBefore, 10_000);
      r.enqueue(next);
      // A takeover claims the row with attempts + 1 (job-lease.ts): the next renewal finds it gone.
      const taken = await row(slow);
      await h.db.memory.updateMany({ where: { id: slow }, data: { processingAttempts: taken.processingAttempts + 1, processingStartedAt: new Date() } });
      const takenAt = Date.now();
      await until("the next document is done", async () => (await row(next)).processingStatus === "done", 10_000);
      // Within a renewal (200 ms) and the read, not at the download's cap (five minutes at the defaults).
      expect(Date.now() - takenAt).toBeLessThan(5_000);
      expect(store.closed).toBe(store.reads);
      expect(await row(slow)).toMatchObject({ processingStatus: "running", processingError: null });
    } finally {
      r.stop();
      await r.idle();
    }
  }, 30_000);
  it("stops when the lease is lost while the store is looked up (before the download begins), freeing the turn", async () => {
    // The lease was checked before `await blobStore()` and listened to only after it: lost in between,
    // nothing noticed, and the download ran on (holding the documents' turn) to its deadline.
    process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS = "20000";
    try {
      const slow = await h.db.memory.findUniqueOrThrow({ where: { id: await fileMemory("Notes from a very slow bucket, lost at once.", true) } });
      const next = await h.db.memory.findUniqueOrThrow({ where: { id: await fileMemory("The kitchen is cleaned on Tuesdays.", false) } });
      const before = { heads: store.heads, reads: store.reads };
      const lease = new AbortController();
      const lost = extractMemoryText(slow, { signal: lease.signal });
      lease.abort(new Error("the job's lease was lost"));
      await expect(lost).rejects.toThrow("the job's lease was lost");
      const startedAt = Date.now();
      // The documents' one turn is free again: the next document is read at once, not after the trickle.
      expect((await extractMemoryText(next)).content).toContain("The kitchen is cleaned on Tuesdays.");
      expect(Date.now() - startedAt).toBeLessThan(3_000);
      expect({ heads: store.heads, reads: store.reads }).toEqual(before);
    } finally {
      delete process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS;
    }
  }, 30_000);

  it("keeps ENGRAM_EXTRACT_DOWNLOAD_MAX_MS from the start when the size's own limit is shorter: the head's wait counts", async () => {
    // The size's limit (ten times the idle limit plus a second per 64 KiB) was armed anew once the head
    // answered, so a download ran past the deadline by the head's wait.
    Object.assign(process.env, { ENGRAM_EXTRACT_TIMEOUT_MS: "500", ENGRAM_EXTRACT_DOWNLOAD_MAX_MS: "6200" });
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    store.headMs = 400;
    try {
      // 500 ms idle: the size's limit is 10 x 0.5 s + 1 s = 6 s, under the 6.2 s deadline, armed 0.4 s in.
      const slow = await h.db.memory.findUniqueOrThrow({ where: { id: await fileMemory("Figures from a bucket slow to answer and slower to send.", true) } });
      const startedAt = Date.now();
      await expect(extractMemoryText(slow)).rejects.toThrow("The file could not be read from storage in time: its download took longer than 6.2 s");
      expect(Date.now() - startedAt).toBeLessThan(6_350);
    } finally {
      store.headMs = 0;
      errors.mockRestore();
      delete process.env.ENGRAM_EXTRACT_TIMEOUT_MS;
      delete process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS;
    }
  }, 30_000);
});

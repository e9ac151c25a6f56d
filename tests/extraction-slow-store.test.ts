import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import type { Memory } from "@/lib/db/generated/client.ts";
import { extractMemoryText } from "@/lib/extraction/extract-memory-text.ts";

/**
 * Documents are read one at a time per process, and that turn covers fetching the file from storage.
 * A store that trickles an object's bytes (a slow S3 or Vercel Blob read) held the turn with no
 * deadline, so every PDF, DOCX and text job behind it waited for minutes, and a job waiting for the
 * turn ignored its lease being lost. Then the fetch had ENGRAM_EXTRACT_TIMEOUT_MS in all, the parse
 * limit, so a large file on a slow but working store failed every attempt. Now a store that sends
 * nothing for ENGRAM_EXTRACT_TIMEOUT_MS is given up (retried later), one that keeps sending is waited
 * for up to a generous cap, and a job waiting for its turn leaves when its signal aborts.
 */

const SIZE = 64 * 1024;
const STEADY_CHUNKS = 20;

/**
 * The embedded store, but objects under `slow/` come a byte every 100 ms (and never end in a test's time),
 * under `steady/` 1 KiB every 100 ms for 2 s, and under `stuck/` three bytes and then nothing.
 */
class TricklingStore extends LocalBlobStore {
  reads = 0;
  closed = 0;
  heads = new Map<string, number>();
  override async head(key: string) {
    if (key.startsWith("slow/") || key.startsWith("stuck/")) return { size: SIZE, contentType: "text/plain" };
    if (key.startsWith("steady/")) return { size: STEADY_CHUNKS * 1024, contentType: "text/plain" };
    // A read that fails, then a look at whether the object is there that never answers.
    if (key.startsWith("broken/")) {
      this.heads.set(key, (this.heads.get(key) ?? 0) + 1);
      return this.heads.get(key) === 1 ? { size: SIZE, contentType: "text/plain" } : new Promise<never>(() => {});
    }
    return super.head(key);
  }
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    if (key.startsWith("broken/")) throw new Error("connection reset by the store");
    if (!["slow/", "steady/", "stuck/"].some((prefix) => key.startsWith(prefix))) return super.read(key, range);
    this.reads += 1;
    let timer: NodeJS.Timeout | undefined;
    let sent = 0;
    const stream = new Readable({
      read() {
        if (key.startsWith("stuck/")) {
          if (sent++ < 3) stream.push(Buffer.from("a"));
          return;
        }
        if (key.startsWith("steady/")) {
          timer = setTimeout(() => stream.push(sent++ < STEADY_CHUNKS ? Buffer.alloc(1024, "b") : null), 100);
          return;
        }
        timer = setTimeout(() => stream.push(Buffer.from("a")), 100);
      },
      destroy: (error, callback) => {
        clearTimeout(timer);
        this.closed += 1;
        callback(error);
      },
    });
    return stream;
  }
}

let dir: string;
let store: TricklingStore;
const saved = process.env.ENGRAM_EXTRACT_TIMEOUT_MS;

beforeAll(async () => {
  // No bytes for 0.5 s: stuck. A download that keeps going may take 10 × 0.5 s + 1 s per 64 KiB.
  process.env.ENGRAM_EXTRACT_TIMEOUT_MS = "500";
  dir = mkdtempSync(path.join(tmpdir(), "engram-extract-slow-"));
  store = new TricklingStore(dir, async () => Buffer.alloc(32, 1));
  setBlobStore(store);
  await store.write("fast/notes.txt", Buffer.from("Deploys go out on Tuesdays after the standup."), "text/plain");
});
afterAll(() => {
  setBlobStore(undefined);
  rmSync(dir, { recursive: true, force: true });
  if (saved === undefined) delete process.env.ENGRAM_EXTRACT_TIMEOUT_MS;
  else process.env.ENGRAM_EXTRACT_TIMEOUT_MS = saved;
});

const fileMemory = (key: string) =>
  ({ fileRef: { object_key: key, filename: path.basename(key), content_type: "text/plain", size_bytes: SIZE }, content: "", contentType: "file", hint: null, linkUrl: null }) as unknown as Memory;

/** Settles with `promise`, or says it was still waiting after `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<{ value?: T; error?: unknown; late?: true }> {
  return Promise.race([
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<{ late: true }>((resolve) => setTimeout(() => resolve({ late: true }), ms).unref()),
  ]);
}

describe("a slow storage read during file extraction", () => {
  it("a store that trickles for ever is given up at the download's cap (to be retried), and the documents behind it are read", async () => {
    const slow = within(extractMemoryText(fileMemory("slow/trickle.txt")), 12_000);
    const fast = within(extractMemoryText(fileMemory("fast/notes.txt")), 12_000);
    const [slowDone, fastDone] = await Promise.all([slow, fast]);
    expect(slowDone.late).toBeUndefined();
    expect(String(slowDone.error)).toMatch(/could not be read from storage in time/);
    expect(fastDone.late).toBeUndefined();
    expect(fastDone.value?.content).toContain("Deploys go out on Tuesdays");
    // The trickle was stopped, not left running.
    expect(store.closed).toBe(store.reads);
  }, 20_000);

  it("a store that stops sending is given up once nothing came for ENGRAM_EXTRACT_TIMEOUT_MS", async () => {
    const startedAt = Date.now();
    const stuck = await within(extractMemoryText(fileMemory("stuck/halfway.txt")), 3_000);
    expect(stuck.late).toBeUndefined();
    expect(String(stuck.error)).toMatch(/could not be read from storage in time/);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(450);
    expect(store.closed).toBe(store.reads);
  }, 20_000);

  it("a slow store that keeps sending is waited for, though the download takes longer than ENGRAM_EXTRACT_TIMEOUT_MS", async () => {
    // 20 KiB over 2 s, four times the limit: a whole-download deadline failed it on every attempt.
    const steady = await within(extractMemoryText(fileMemory("steady/report.txt")), 10_000);
    expect(steady.late).toBeUndefined();
    expect(steady.error).toBeUndefined();
    expect(steady.value?.content).toBe("b".repeat(STEADY_CHUNKS * 1024));
    expect(steady.value?.error).toBeNull();
  }, 20_000);

  it("a failed read whose follow-up look at the object hangs is given up at the same limit", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const broken = await within(extractMemoryText(fileMemory("broken/reset.txt")), 8_000);
      expect(broken.late).toBeUndefined();
      expect(String(broken.error)).toMatch(/could not be read from storage/);
    } finally {
      errors.mockRestore();
    }
  }, 20_000);

  it("a download that keeps sending is stopped at ENGRAM_EXTRACT_DOWNLOAD_MAX_MS, saying so, and the document behind it gets the turn", async () => {
    // The cap grew with the file (ten times the idle limit plus a second per 64 KiB: about 12 minutes for
    // 25 MiB at the default), and every document behind a trickling store waited for it in the one turn.
    process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS = "1500";
    try {
      const startedAt = Date.now();
      const slow = within(extractMemoryText(fileMemory("slow/deadline.txt")), 4_000);
      const fast = within(extractMemoryText(fileMemory("fast/notes.txt")), 4_000);
      const [slowDone, fastDone] = await Promise.all([slow, fast]);
      expect(slowDone.late).toBeUndefined();
      expect(String(slowDone.error)).toMatch(/could not be read from storage in time: its download took longer than 1\.5 s/);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_400);
      expect(fastDone.value?.content).toContain("Deploys go out on Tuesdays");
      expect(store.closed).toBe(store.reads);
    } finally {
      delete process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS;
    }
  }, 20_000);

  it("a download in progress stops as soon as the job's lease is lost, and frees the documents' turn", async () => {
    // Only a job still waiting for its turn looked at the signal: one whose lease was lost mid-download
    // (taken over, or the memory deleted or rewritten) kept the turn until the download's cap.
    const controller = new AbortController();
    const readsBefore = store.reads;
    const slow = within(extractMemoryText(fileMemory("slow/lost.txt"), { signal: controller.signal }), 15_000);
    // In its turn and downloading (not still waiting for the turn, which a lost lease always left).
    for (let i = 0; i < 400 && store.reads === readsBefore; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(store.reads).toBe(readsBefore + 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const abortedAt = Date.now();
    controller.abort(new Error("the lease was lost"));
    const left = await slow;
    expect(left.late).toBeUndefined();
    expect(String(left.error)).toMatch(/the lease was lost/);
    expect(Date.now() - abortedAt).toBeLessThan(500);
    expect(store.closed).toBe(store.reads);
    const fast = await within(extractMemoryText(fileMemory("fast/notes.txt")), 1_000);
    expect(fast.value?.content).toContain("Deploys go out on Tuesdays");
  }, 20_000);

  it("a job waiting for its turn leaves as soon as its signal aborts (its lease was lost)", async () => {
    const slow = within(extractMemoryText(fileMemory("slow/again.txt")), 12_000);
    const controller = new AbortController();
    const waiting = within(extractMemoryText(fileMemory("fast/notes.txt"), { signal: controller.signal }), 8_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const abortedAt = Date.now();
    controller.abort();
    const left = await waiting;
    expect(left.late).toBeUndefined();
    expect(left.error).toBeDefined();
    expect(Date.now() - abortedAt).toBeLessThan(500);
    expect((await slow).late).toBeUndefined();
  }, 20_000);
});

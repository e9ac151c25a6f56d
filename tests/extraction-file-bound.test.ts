import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { makePdf } from "./support/make-files.ts";
import { dispatch } from "./support/router.ts";

/**
 * Extraction read a whole uploaded file into memory (and copied it to the reader's thread), which
 * is fine at the default 25 MiB upload limit and not at the configurable one (up to 2 GiB). It now
 * reads at most ENGRAM_EXTRACT_MAX_BYTES of a file: a text file's first part, with a note saying so;
 * a PDF, DOCX or image past it (unreadable from its first part alone) not at all, also with a note.
 */
const LIMIT = 256 * 1024;

/** The embedded store, recording the most any one read of an object streamed. */
class MeasuredStore extends LocalBlobStore {
  largestRead = 0;
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const stream = await super.read(key, range);
    let bytes = 0;
    stream.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      this.largestRead = Math.max(this.largestRead, bytes);
    });
    return stream;
  }
}

let h: Harness;
let ann: Client;
let blobDir: string;
let store: MeasuredStore;
const saved = { max: process.env.ENGRAM_EXTRACT_MAX_BYTES, upload: process.env.ENGRAM_UPLOAD_MAX_BYTES };

beforeAll(async () => {
  process.env.ENGRAM_EXTRACT_MAX_BYTES = String(LIMIT);
  process.env.ENGRAM_UPLOAD_MAX_BYTES = String(8 * LIMIT);
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-extract-bound-"));
  store = new MeasuredStore(blobDir);
  setBlobStore(store);
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
  for (const [name, value] of [["ENGRAM_EXTRACT_MAX_BYTES", saved.max], ["ENGRAM_UPLOAD_MAX_BYTES", saved.upload]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

async function upload(filename: string, contentType: string, bytes: Buffer, content = "") {
  const intent = await ann.post("/v1/uploads", { filename, content_type: contentType, size_bytes: bytes.length, purpose: "memory_attachment" });
  expect(intent.status, intent.text).toBe(201);
  const i = intent.body.data;
  const sent = await dispatch(new Request(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(bytes), duplex: "half" } as RequestInit));
  expect(sent.status, await sent.text()).toBe(200);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const res = await ann.post("/v1/memories", { content, file_ref: { ...i.file_ref, sha256 } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as string;
}

const full = async (id: string) => (await ann.get(`/v1/memories/${id}`)).body.data;

describe("extraction reads a bounded part of a file (ENGRAM_EXTRACT_MAX_BYTES)", () => {
  it("a text file past the limit: its first part is read and indexed, the rest never read, and processing_error says so", async () => {
    const line = "The deploy checklist: drain the queue, run the migrations, then restart the web tier.\n";
    const text = Buffer.from(line.repeat(Math.ceil((4 * LIMIT) / line.length)));
    store.largestRead = 0;
    const id = await upload("checklist.txt", "text/plain", text);
    const memory = await waitProcessed(h.db, ann, id, 60_000);
    expect(memory).toMatchObject({ state: "active", processing_status: "done" });
    expect(memory.processing_error).toMatch(/only its first 256 KiB/);
    const stored = await full(id);
    expect(stored.content.startsWith(line)).toBe(true);
    expect(Buffer.byteLength(stored.content)).toBeLessThanOrEqual(LIMIT);
    // At most the limit and one byte (that says there is more) came out of storage in any one read.
    expect(store.largestRead).toBeLessThanOrEqual(LIMIT + 1);
  });

  it("a PDF past the limit is not read at all (its first part alone is no PDF): active with its note and why", async () => {
    const pdf = await makePdf([["Quarterly kiln report"]]);
    // Bytes after %%EOF are ignored by readers; they make the file larger than the limit.
    const big = Buffer.concat([pdf, Buffer.alloc(2 * LIMIT, 0x20)]);
    store.largestRead = 0;
    const id = await upload("report.pdf", "application/pdf", big, "Kiln report for Q3");
    const memory = await waitProcessed(h.db, ann, id, 60_000);
    expect(memory).toMatchObject({ state: "active", processing_status: "done" });
    expect(memory.processing_error).toMatch(/larger than the 256 KiB/);
    expect((await full(id)).content).toBe("Kiln report for Q3");
    expect(store.largestRead).toBeLessThanOrEqual(LIMIT + 1);
  });

  it("a file within the limit reads as ever", async () => {
    const id = await upload("short.txt", "text/plain", Buffer.from("Glaze recipes live in the studio binder.\n"));
    const memory = await waitProcessed(h.db, ann, id, 60_000);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect((await full(id)).content).toBe("Glaze recipes live in the studio binder.");
  });
});

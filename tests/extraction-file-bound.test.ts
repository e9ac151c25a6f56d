import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import type { Memory } from "@/lib/db/generated/client.ts";
import { extractMemoryText } from "@/lib/extraction/extract-memory-text.ts";
import { readDocumentInThread } from "@/lib/extraction/extraction-thread.ts";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
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
  /** Extraction reads (more than a sniff) of objects in `watched`, and the most other such files held at one's start. */
  watched = new Set<string>();
  extractionReads: string[] = [];
  mostHeldAtOnce = 0;
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    if (this.watched.has(key) && range && range.end >= 64 * 1024) {
      // Files read before this one whose memory has not taken in their text yet: their bytes are still held.
      const earlier = this.extractionReads.filter((k) => k !== key);
      const rows = await h.db.memory.findMany({ where: { extractedAt: null }, select: { fileRef: true } });
      const held = rows.filter((row) => earlier.includes((row.fileRef as { object_key?: string } | null)?.object_key ?? "")).length;
      this.mostHeldAtOnce = Math.max(this.mostHeldAtOnce, held);
      this.extractionReads.push(key);
    }
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

  it("files are read from storage one at a time, as the reader takes them: waiting jobs hold no file's bytes", async () => {
    // The runner works on 16 memories at once and the reader takes one file at a time: each waiting
    // job held its whole file (and a copy for the reader) meanwhile, 16 files' worth at once.
    const line = "Firing schedule: bisque on Monday, glaze on Thursday, unload on Saturday.\n";
    const texts = [0, 1, 2, 3].map((n) => Buffer.from(`Kiln ${n}\n${line.repeat(Math.floor(LIMIT / 2 / line.length))}`));
    const intents = [];
    for (let n = 0; n < 4; n++) {
      const text = texts[n]!;
      const intent = await ann.post("/v1/uploads", { filename: `schedule-${n}.txt`, content_type: "text/plain", size_bytes: text.length, purpose: "memory_attachment" });
      const i = intent.body.data;
      const sent = await dispatch(new Request(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(text), duplex: "half" } as RequestInit));
      expect(sent.status).toBe(200);
      store.watched.add(i.object_key);
      intents.push({ ...i, sha256: createHash("sha256").update(text).digest("hex") });
    }
    const created = await Promise.all(intents.map((i) => ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: i.sha256 } })));
    expect(created.map((res) => res.status)).toEqual([201, 201, 201, 201]);
    for (const res of created) expect(await waitProcessed(h.db, ann, res.body.data.id, 60_000)).toMatchObject({ processing_status: "done" });
    expect(store.extractionReads).toHaveLength(4);
    // At a file's read, at most the one before it may still be writing its text (its bytes already let go).
    expect(store.mostHeldAtOnce).toBeLessThanOrEqual(1);
  });

  it("a file whose text is longer than a memory holds (3 MiB) says that only its start was kept", async () => {
    // The text was clipped to 3 MiB without a word: a 4 MiB CSV read as complete while a quarter was gone.
    const row = "2026-11-28,kiln-2,cone 6,1222 C,ok\n";
    const csv = Buffer.from(row.repeat(Math.ceil((MAX_CONTENT_BYTES + 512 * 1024) / row.length)));
    const key = `uploads/${ann.id}/long-csv`;
    await store.write(key, csv, "text/csv");
    process.env.ENGRAM_EXTRACT_MAX_BYTES = String(8 * 1024 * 1024);
    try {
      const memory = { fileRef: { object_key: key, filename: "firings.csv", content_type: "text/csv", size_bytes: csv.length }, content: "", contentType: "file", hint: null };
      const result = await extractMemoryText(memory as unknown as Memory);
      expect(Buffer.byteLength(result.content)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
      expect(result.error).toMatch(/longer than the 3 MiB a memory holds; only its first 3 MiB were kept/);
    } finally {
      process.env.ENGRAM_EXTRACT_MAX_BYTES = String(LIMIT);
    }
  });

  it("a page whose text is longer than a memory holds says so too", async () => {
    const line = "Glaze log: cone 6 oxidation, 1222 C, ten-minute hold.\n";
    const page = line.repeat(Math.ceil((MAX_CONTENT_BYTES + 512 * 1024) / line.length));
    const site = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/plain" }).end(page));
    const port = await new Promise<number>((resolve) => site.listen(0, "127.0.0.1", () => resolve((site.address() as AddressInfo).port)));
    setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${port}`] });
    try {
      const memory = { fileRef: null, content: `http://127.0.0.1:${port}/log.txt`, contentType: "link", hint: null, linkUrl: null };
      const result = await extractMemoryText(memory as unknown as Memory);
      expect(Buffer.byteLength(result.content)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
      expect(result.content.startsWith("Glaze log")).toBe(true);
      expect(result.error).toMatch(/longer than the 3 MiB a memory holds; only its first 3 MiB were kept/);
    } finally {
      setLinkFetchPolicyForTests(undefined);
      await new Promise((resolve) => site.close(resolve));
    }
  });

  it("a file within the limit reads as ever", async () => {
    const id = await upload("short.txt", "text/plain", Buffer.from("Glaze recipes live in the studio binder.\n"));
    const memory = await waitProcessed(h.db, ann, id, 60_000);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect((await full(id)).content).toBe("Glaze recipes live in the studio binder.");
  });
});

describe("the reader's thread sends back at most what a memory holds", () => {
  it("a text file longer than a memory holds is cut in the thread, between characters, and says it was cut", async () => {
    // A 25 MiB text file was decoded and posted back whole, to be cut to 3 MiB in the main thread.
    const line = "Glasur: Kegel 6, 1222 °C — zehn Minuten halten. 窯\n";
    const text = "x" + line.repeat(Math.ceil((MAX_CONTENT_BYTES + 256 * 1024) / Buffer.byteLength(line)));
    // One byte off a character boundary at the cut: a byte cut would leave half a character behind.
    const result = await readDocumentInThread("text", Buffer.from(text.slice(1)), MAX_CONTENT_BYTES);
    expect(Buffer.byteLength(result.text)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
    expect(Buffer.byteLength(result.text)).toBeGreaterThan(MAX_CONTENT_BYTES - 4);
    expect(result.text).not.toContain("\uFFFD");
    expect(result.text.startsWith(line)).toBe(true);
    expect(result.clipped).toBe(true);
  });

  it("an HTML file whose text is longer than a memory holds is cut in the thread too", async () => {
    const paragraph = "<p>Glasur: Kegel 6, 1222 °C — zehn Minuten halten.</p>\n";
    const html = `<html><head><title>Glasuren</title></head><body>${paragraph.repeat(Math.ceil((2 * MAX_CONTENT_BYTES) / Buffer.byteLength(paragraph)))}</body></html>`;
    const result = await readDocumentInThread("html", Buffer.from(html), MAX_CONTENT_BYTES);
    expect(Buffer.byteLength(result.text)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
    expect(result.text.startsWith("Glasur: Kegel 6")).toBe(true);
    expect(result.clipped).toBe(true);
  }, 60_000);

  it("a text file within what a memory holds is not marked cut", async () => {
    const result = await readDocumentInThread("text", Buffer.from("Glaze recipes live in the studio binder.\n"), MAX_CONTENT_BYTES);
    expect(result).toEqual({ text: "Glaze recipes live in the studio binder." });
  });
});

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import JSZip from "jszip";
import { sweepUploadsFunction } from "@/inngest/upload-functions.ts";
import { MAX_XML_DEPTH, unpackedSizeProblem, xmlDepthExceeds } from "@/lib/extraction/check-unpacked-size.mjs";
import { extractText } from "@/lib/extraction/extract-text.ts";
import { fragmentToMarkdown } from "@/lib/extraction/html-to-markdown.mjs";
import { blobStore, setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { backgroundRunner, startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import { startUploadSweeper, sweepPartialUploads, sweepUploads } from "@/lib/uploads/sweep-uploads.ts";
import { assertUploadLimit, DOCX_TYPE, UPLOAD_URL_TTL_SECONDS } from "@/lib/uploads/upload-limits.ts";
import { charactersRead } from "./support/characters-read.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { makeDocx, makePdf, makePng } from "./support/make-files.ts";
import { dispatch } from "./support/router.ts";

/**
 * Files end to end against the embedded blob store on a temporary directory:
 * intent → signed PUT (streamed to disk) → create with file_ref → extraction
 * in the background pipeline → recall → download of the same bytes.
 */
let h: Harness;
let ann: Client;
let bob: Client;
let blobDir: string;

beforeAll(async () => {
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-blobs-"));
  setBlobStore(new LocalBlobStore(blobDir));
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
});

async function intent(client: Client, filename: string, contentType: string, size: number) {
  const res = await client.post("/v1/uploads", { filename, content_type: contentType, size_bytes: size, purpose: "memory_attachment" });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

async function put(url: string, headers: Record<string, string>, body: Buffer | ReadableStream<Uint8Array>) {
  const payload = Buffer.isBuffer(body) ? new Uint8Array(body) : body;
  const res = await dispatch(new Request(url, { method: "PUT", headers, body: payload, duplex: "half" } as RequestInit));
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Intent, PUT, create: returns the created memory. */
async function upload(client: Client, filename: string, contentType: string, bytes: Buffer, extra: Record<string, unknown> = {}) {
  const i = await intent(client, filename, contentType, bytes.length);
  const sent = await put(i.upload_url, i.headers, bytes);
  expect(sent.status, JSON.stringify(sent.body)).toBe(200);
  const res = await client.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: sha256(bytes) }, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

async function processed(client: Client, id: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await client.get(`/v1/memories/${id}`);
    if (["done", "failed"].includes(res.body.data.processing_status)) return res.body.data;
    if (Date.now() > deadline) throw new Error(`memory ${id} still ${res.body.data.processing_status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("POST /v1/uploads", () => {
  it("answers the decided shape with a signed PUT target", async () => {
    const i = await intent(ann, "notes.pdf", "application/pdf", 1234);
    expect(i).toMatchObject({
      method: "PUT",
      headers: { "Content-Type": "application/pdf" },
      filename: "notes.pdf",
      content_type: "application/pdf",
      size_bytes: 1234,
      purpose: "memory_attachment",
      max_bytes: 25 * 1024 * 1024,
      expires_in: 900,
      file_ref: { object_key: i.object_key, filename: "notes.pdf", content_type: "application/pdf", size_bytes: 1234 },
    });
    expect(i.object_key).toContain(ann.id);
    expect(i.upload_url).toMatch(/^http:\/\/engram\.test\/v1\/blobs\/uploads\//);
  });

  it("signs URLs for the origin the client used (a browser upload stays same-origin)", async () => {
    const body = { filename: "a.txt", content_type: "text/plain", size_bytes: 3, purpose: "memory_attachment" };
    const direct = await ann.post("/v1/uploads", body, { headers: { host: "127.0.0.1:3000" } });
    expect(direct.body.data.upload_url).toMatch(/^http:\/\/127\.0\.0\.1:3000\/v1\/blobs\//);
    const proxied = await ann.post("/v1/uploads", body, { headers: { "x-forwarded-host": "memory.example.org", "x-forwarded-proto": "https" } });
    expect(proxied.body.data.upload_url).toMatch(/^https:\/\/memory\.example\.org\/v1\/blobs\//);
  });

  it("refuses a type outside the list with 415 and an oversize file with 413, with details", async () => {
    const exe = await ann.post("/v1/uploads", { filename: "x.exe", content_type: "application/x-msdownload", size_bytes: 10, purpose: "memory_attachment" });
    expect(exe.status).toBe(415);
    expect(exe.body.error).toMatchObject({ code: "unsupported_content_type", details: { content_type: "application/x-msdownload" } });
    expect(exe.body.error.details.allowed).toContain("application/pdf");
    const big = await ann.post("/v1/uploads", { filename: "big.pdf", content_type: "application/pdf", size_bytes: 25 * 1024 * 1024 + 1, purpose: "memory_attachment" });
    expect(big.status).toBe(413);
    expect(big.body.error).toMatchObject({ code: "file_too_large", details: { size_bytes: 25 * 1024 * 1024 + 1, max_bytes: 25 * 1024 * 1024 } });
    expect((await ann.post("/v1/uploads", { filename: "", content_type: "text/plain", size_bytes: 1 })).status).toBe(400);
    expect((await h.anonymous.post("/v1/uploads", { filename: "a.txt", content_type: "text/plain", size_bytes: 1 })).status).toBe(401);
  });

  it("ENGRAM_UPLOAD_MAX_BYTES past 2 GiB - 1 (the size columns' range) stops start-up, and is never applied past it", async () => {
    process.env.ENGRAM_UPLOAD_MAX_BYTES = String(3 * 1024 ** 3);
    try {
      expect(() => assertUploadLimit()).toThrow("ENGRAM_UPLOAD_MAX_BYTES must be at most 2147483647 (2 GiB - 1, the largest file size the database records), got 3221225472");
      // Before, this intent passed the size check and its row overflowed the int size column: 500.
      const huge = await ann.post("/v1/uploads", { filename: "huge.pdf", content_type: "application/pdf", size_bytes: 2 ** 31, purpose: "memory_attachment" });
      expect(huge.status, JSON.stringify(huge.body)).toBe(413);
      expect(huge.body.error).toMatchObject({ code: "file_too_large", details: { size_bytes: 2 ** 31, max_bytes: 2 ** 31 - 1 } });
      expect((await ann.get("/v1/usage")).body.data.limits.max_attachment_bytes).toBe(2 ** 31 - 1);
      process.env.ENGRAM_UPLOAD_MAX_BYTES = String(2 ** 31 - 1);
      expect(() => assertUploadLimit()).not.toThrow();
    } finally {
      delete process.env.ENGRAM_UPLOAD_MAX_BYTES;
    }
  });
});

describe("pending uploads", () => {
  it("one user may have only so many uploads waiting to be attached, also when they ask at once; attaching frees a place", async () => {
    process.env.ENGRAM_UPLOAD_MAX_PENDING = "3";
    try {
      const pia = await h.user("Pia");
      const ask = (n: number) => pia.post("/v1/uploads", { filename: `part-${n}.txt`, content_type: "text/plain", size_bytes: 4, purpose: "memory_attachment" });
      const answers = await Promise.all([1, 2, 3, 4, 5, 6].map(ask));
      expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 413, 413, 413]);
      expect(answers.find((a) => a.status === 413)!.body.error).toMatchObject({ code: "quota_exceeded", details: { pending_uploads: 3, max_pending_uploads: 3 } });
      // Another user is not held to Pia's.
      expect((await bob.post("/v1/uploads", { filename: "b.txt", content_type: "text/plain", size_bytes: 4 })).status).toBe(201);

      const first = answers.find((a) => a.status === 201)!.body.data;
      expect((await put(first.upload_url, first.headers, Buffer.from("abcd"))).status).toBe(200);
      const attached = await pia.post("/v1/memories", { file_ref: first.file_ref });
      expect(attached.status).toBe(201);
      await processed(pia, attached.body.data.id);
      expect((await ask(7)).status).toBe(201);
      expect((await ask(8)).status).toBe(413);
    } finally {
      delete process.env.ENGRAM_UPLOAD_MAX_PENDING;
    }
  });
});

describe("the embedded store's signed URLs", () => {
  it("refuse another key, a changed size or type, a replay after expiry, and a second PUT", async () => {
    const bytes = Buffer.from("hello signed world\n");
    const a = await intent(ann, "a.txt", "text/plain", bytes.length);
    const b = await intent(ann, "b.txt", "text/plain", bytes.length);
    // a's signature on b's key
    const forged = a.upload_url.replace(a.object_key, b.object_key);
    expect((await put(forged, a.headers, bytes)).status).toBe(403);
    const resized = a.upload_url.replace(`size=${bytes.length}`, `size=${bytes.length + 5}`);
    expect((await put(resized, a.headers, Buffer.concat([bytes, Buffer.from("12345")]))).status).toBe(403);
    expect((await put(a.upload_url, { "Content-Type": "text/html" }, bytes)).status).toBe(403);
    // Expired: the same URL checked an hour later.
    const store = new LocalBlobStore(blobDir);
    const query = new URL(a.upload_url).searchParams;
    expect(await store.checkUpload(a.object_key, query, Date.now() + 3600_000)).toEqual({ ok: false, reason: "expired" });
    expect(await store.checkUpload(b.object_key, query)).toEqual({ ok: false, reason: "invalid_signature" });
    // A tampered expiry breaks the signature.
    const later = a.upload_url.replace(/expires=\d+/, `expires=${Math.floor(Date.now() / 1000) + 99999}`);
    expect((await put(later, a.headers, bytes)).status).toBe(403);
    expect((await put(a.upload_url, a.headers, bytes)).status).toBe(200);
    const again = await put(a.upload_url, a.headers, bytes);
    expect(again.status).toBe(409);
  });

  it("a filename holding a newline cannot move signed bytes into the type or disposition of a download URL", async () => {
    const bytes = Buffer.from("<script>alert(1)</script>");
    const created = await upload(ann, "page.txt", "text/plain", bytes, { content: "Page" });
    const { objectKey } = await h.db.attachment.findFirstOrThrow({ where: { memoryId: created.id } });
    const store = new LocalBlobStore(blobDir);
    const signed = new URL(
      await store.signDownload(objectKey, { filename: "page.txt\ntext/html", contentType: "text/plain", inline: false, expiresIn: 300, baseUrl: "http://engram.test" }),
    );
    expect((await dispatch(new Request(signed))).status).toBe(200);
    // The same signature over the same joined text, split differently: served as text/html.
    const moved = new URL(signed);
    moved.searchParams.set("filename", "page.txt");
    moved.searchParams.set("type", "text/html");
    moved.searchParams.set("disposition", "text/plain\nattachment");
    const res = await dispatch(new Request(moved));
    expect(res.headers.get("content-type")).not.toBe("text/html");
    expect(res.status).toBe(403);
  });

  it("bytes that landed without their metadata (a crash between the two) can still be attached, not stuck between 'not uploaded' and 'already uploaded'", async () => {
    const bytes = Buffer.from("Kiln log: cone 6 reached at 14:20.\n");
    const i = await intent(ann, "kiln.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    // What a crash after the bytes were linked into place, before their metadata was written, leaves.
    rmSync(`${path.join(blobDir, ...i.object_key.split("/"))}.meta.json`);
    // The URL cannot write them again (the object is there) ...
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(409);
    // ... so the create must take them as they are: only complete, checked bytes are ever put in place.
    const res = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: sha256(bytes) } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await processed(ann, res.body.data.id)).state).toBe("active");
    const full = (await ann.get(`/v1/memories/${res.body.data.id}`)).body.data;
    expect(full.content).toContain("cone 6 reached");
    const download = await ann.get(`/v1/memories/${res.body.data.id}/attachments/${full.attachments[0].id}/download`);
    expect(download.status).toBe(200);
    expect(download.text).toBe(bytes.toString());
  });

  it("an expired URL is refused over HTTP too", async () => {
    const bytes = Buffer.from("late");
    const i = await intent(ann, "late.txt", "text/plain", bytes.length);
    // Re-sign the same key with an expiry in the past through the store itself.
    const store = new LocalBlobStore(blobDir);
    const expired = await store.signUpload(i.object_key, { contentType: "text/plain", sizeBytes: bytes.length, expiresIn: -10, baseUrl: "http://engram.test" });
    const res = await put(expired.url, expired.headers, bytes);
    expect(res.status).toBe(403);
    expect(res.body.error.details.reason).toBe("expired");
  });

  it("a truncated or oversized body is discarded, nothing is left on disk", async () => {
    const i = await intent(ann, "cut.txt", "text/plain", 100);
    const short = await put(i.upload_url, { "Content-Type": "text/plain" }, streamOf([Buffer.alloc(60, 97)]));
    expect(short.status).toBe(400);
    expect(short.body.error.message).toMatch(/Truncated upload: received 60 of 100/);
    const long = await put(i.upload_url, { "Content-Type": "text/plain" }, streamOf([Buffer.alloc(80, 97), Buffer.alloc(80, 97)]));
    expect(long.status).toBe(413);
    const userDir = path.join(blobDir, "uploads", ann.id);
    expect(readdirSync(userDir).filter((f) => f.includes(i.object_key.split("/").pop()))).toEqual([]);
    const create = await ann.post("/v1/memories", { content: "", file_ref: i.file_ref });
    expect(create.status).toBe(400);
    expect(create.body.error.message).toMatch(/not been uploaded/);
  });

  it("streams a 25 MiB upload to disk chunk by chunk", async () => {
    const size = 25 * 1024 * 1024;
    const i = await intent(ann, "big.txt", "text/plain", size);
    const chunk = Buffer.alloc(256 * 1024, 98);
    const hash = createHash("sha256");
    const userDir = path.join(blobDir, "uploads", ann.id);
    const id = i.object_key.split("/").pop();
    let produced = 0;
    let onDiskAt20MiB = -1;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (produced >= size) return controller.close();
        if (produced === 20 * 1024 * 1024) {
          // Before the client has sent the rest, most of what it sent is already on disk.
          const part = readdirSync(userDir).find((f) => f.startsWith(`${id}.part-`));
          onDiskAt20MiB = part ? (await stat(path.join(userDir, part))).size : 0;
        }
        produced += chunk.length;
        hash.update(chunk);
        controller.enqueue(new Uint8Array(chunk));
      },
    });
    const res = await put(i.upload_url, i.headers, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ size_bytes: size, sha256: hash.digest("hex") });
    expect(onDiskAt20MiB).toBeGreaterThan(16 * 1024 * 1024);
  });
});

function streamOf(parts: Buffer[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(new Uint8Array(part));
      controller.close();
    },
  });
}

describe("create with file_ref", () => {
  it("a two-page PDF: processing → active, page 2 is recalled, the download is the same bytes", async () => {
    const pdf = await makePdf([
      ["Quarterly planning notes", "The roadmap review happens on Mondays."],
      ["Appendix", "The zephyrine turbine inspection is due every fortnight in hangar nine."],
    ]);
    const created = await upload(ann, "planning.pdf", "application/pdf", pdf);
    expect(created).toMatchObject({ title: "planning.pdf", content_type: "file", state: "processing", processing_status: "pending" });
    const memory = await processed(ann, created.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect(memory.content).toContain("## Page 2");
    expect(memory.content).toContain("zephyrine turbine inspection");
    expect(memory.attachments).toEqual([
      expect.objectContaining({
        memory_id: created.id,
        owner_id: ann.id,
        kind: "original",
        filename: "planning.pdf",
        content_type: "application/pdf",
        size_bytes: pdf.length,
        sha256: sha256(pdf),
        inline_eligible: false,
      }),
    ]);
    const recall = await ann.post("/v1/recall", { query: "when is the zephyrine turbine inspection due" });
    expect(recall.status).toBe(200);
    const hit = recall.body.data.memories.find((m: { id: string }) => m.id === created.id);
    expect(hit, JSON.stringify(recall.body.data.memories.map((m: { title: string }) => m.title))).toBeDefined();
    expect(hit.chunk_content).toContain("zephyrine");

    const download = await dispatch(
      new Request(`http://engram.test/v1/memories/${created.id}/attachments/${memory.attachments[0].id}/download`, { headers: { authorization: `Bearer ${ann.key}` } }),
    );
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("application/pdf");
    expect(download.headers.get("content-disposition")).toMatch(/^attachment; filename="planning.pdf"/);
    expect(Buffer.from(await download.arrayBuffer()).equals(pdf)).toBe(true);
  });

  it("sharing a file copies its text, not its bytes", async () => {
    const team = await h.teamHub(ann, [[bob, "contributor"]]);
    const pdf = await makePdf([["Hangar rota", "The quokka drill runs every second Thursday."]]);
    const created = await upload(ann, "rota.pdf", "application/pdf", pdf);
    const original = await processed(ann, created.id);
    const shared = await ann.post(`/v1/memories/${created.id}/share`, { target_hub_id: team });
    expect(shared.status, JSON.stringify(shared.body)).toBe(201);
    const copy = await processed(bob, shared.body.data.id);
    expect(copy).toMatchObject({ hub_id: team, title: "rota.pdf", attachments: [], state: "active" });
    expect(copy.content_type).not.toBe("file");
    expect(copy.content).toBe(original.content);
    expect(copy.content).toContain("quokka drill");
  });

  it("a DOCX becomes markdown whose headings are the chunks' heading_chain", async () => {
    const docx = await makeDocx([
      { heading: 1, text: "Incident handbook" },
      { text: "Read this before you are on call." },
      { heading: 2, text: "Paging policy" },
      { text: "Page the secondary when the primary has not acknowledged within fifteen minutes." },
    ]);
    const created = await upload(ann, "handbook.docx", DOCX_TYPE, docx);
    const memory = await processed(ann, created.id);
    expect(memory.processing_error).toBeNull();
    expect(memory.content).toMatch(/^# Incident handbook/m);
    expect(memory.content).toMatch(/^## Paging policy/m);
    const chunks = await h.database.sql.query<{ heading_chain: string; content: string }>(`SELECT heading_chain, content FROM chunks WHERE memory_id = $1`, [created.id]);
    expect(chunks.some((c) => c.heading_chain.includes("Paging policy") || c.heading_chain.includes("Incident handbook"))).toBe(true);
  });

  it("a DOCX that unpacks to more than 100 MiB is not unpacked: active, its note indexed, a processing_error", async () => {
    const zip = await JSZip.loadAsync(await makeDocx([{ text: "Kiln firing log" }]));
    const xml = await zip.file("word/document.xml")!.async("string");
    // 120 MiB of whitespace deflates to about 120 KiB; the parser would hold it all, and an XML tree of it.
    zip.file("word/document.xml", xml.replace("<w:body>", `<w:body>${" ".repeat(120 * 1024 * 1024)}`));
    const bomb = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const created = await upload(ann, "log.docx", DOCX_TYPE, bomb, { content: "Glaze notes from the spring firing" });
    const memory = await processed(ann, created.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done" });
    expect(memory.processing_error).toMatch(/unpacks to more than 100 MiB/);
    expect(memory.content).toBe("Glaze notes from the spring firing");

    // A header that under-states a part's size does not get it past the limit either.
    const liar = await (await JSZip.loadAsync(await makeDocx([{ text: "x".repeat(5000) }]))).generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    const name = Buffer.from("word/document.xml");
    for (let at = liar.indexOf(name); at >= 0; at = liar.indexOf(name, at + 1)) {
      // Central directory entries name the file 46 bytes in, local headers 30 bytes in; both carry the size.
      if (liar.readUInt32LE(at - 46) === 0x02014b50) liar.writeUInt32LE(10, at - 46 + 24);
      if (liar.readUInt32LE(at - 30) === 0x04034b50) liar.writeUInt32LE(10, at - 30 + 22);
    }
    expect(await extractText(liar, DOCX_TYPE)).toMatchObject({ text: "", error: expect.stringMatching(/larger than their headers say/) });
  }, 60_000);

  it("the unpacked-size check reads the archive as the parser's unzip does: prepended bytes, an under-counted directory, trailing bytes", async () => {
    const zip = await JSZip.loadAsync(await makeDocx([{ text: "Kiln firing log" }]));
    const xml = await zip.file("word/document.xml")!.async("string");
    zip.file("word/document.xml", xml.replace("<w:body>", `<w:body>${" ".repeat(2 * 1024 * 1024)}`));
    const docx = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    const limit = 1024 * 1024;
    expect(unpackedSizeProblem(docx, limit)).toMatch(/unpacks to more than/);
    const eocd = docx.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
    // Bytes before the archive (still starting like one, for the sniffing): the unzip shifts every offset by them.
    const prepended = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(60), docx]);
    // A directory whose end record counts one entry: the unzip reads every entry there is.
    const undercounted = Buffer.from(docx);
    undercounted.writeUInt16LE(1, eocd + 8);
    undercounted.writeUInt16LE(1, eocd + 10);
    // More than a zip comment's 64 KiB after the end record: the unzip looks for it from the very end.
    const trailing = Buffer.concat([docx, Buffer.alloc(70_000)]);
    for (const [name, bytes] of Object.entries({ prepended, undercounted, trailing })) {
      // The parser's unzip opens each of them and finds the whole document part.
      const part = await (await JSZip.loadAsync(bytes)).file("word/document.xml")!.async("uint8array");
      expect(part.length, name).toBeGreaterThan(limit);
      expect(unpackedSizeProblem(bytes, limit), name).toMatch(/unpacks to more than/);
    }
  });

  it("Word's HTML nested thousands deep becomes markdown with its text in order, as a fetched page does, not a stack overflow", () => {
    const deep = `<p>Before the nesting.</p>${"<table><tr><td>".repeat(3000)}<p>Innermost cell.</p><img src="" alt="kiln photo" />${"</td></tr></table>".repeat(3000)}<p>After it.</p>`;
    const markdown = fragmentToMarkdown(deep);
    expect(markdown).toMatch(/Before the nesting\.[\s\S]*Innermost cell\.[\s\S]*\(picture: kiln photo\)[\s\S]*After it\./);
  });

  it("a DOCX of tables nested thousands deep is refused with that reason, not a stack overflow; a few levels read as ever", async () => {
    const nested = async (levels: number) => {
      const zip = await JSZip.loadAsync(await makeDocx([{ text: "Before the tables." }]));
      const cell = (inner: string) => `<w:tbl><w:tr><w:tc>${inner}<w:p/></w:tc></w:tr></w:tbl>`;
      let body = `<w:p><w:r><w:t>Innermost cell.</w:t></w:r></w:p>`;
      for (let i = 0; i < levels; i++) body = cell(body);
      const xml = await zip.file("word/document.xml")!.async("string");
      zip.file("word/document.xml", xml.replace("</w:body>", `${body}</w:body>`));
      return zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    };
    for (const levels of [400, 3000]) {
      const deep = await extractText(await nested(levels), DOCX_TYPE);
      expect(deep, `${levels} levels`).toEqual({ text: "", error: expect.stringMatching(/^The document is nested too deeply to read/) });
    }
    const shallow = await extractText(await nested(5), DOCX_TYPE);
    expect(shallow.error).toBeUndefined();
    expect(shallow.text).toContain("Before the tables.");
    expect(shallow.text).toContain("Innermost cell.");
  }, 60_000);

  it("a DOCX part that is (or only begins like) UTF-16 is depth-checked too: nested thousands deep it is refused the same way", async () => {
    const document = async (levels: number) => {
      const zip = await JSZip.loadAsync(await makeDocx([{ text: "Before the tables." }]));
      const cell = (inner: string) => `<w:tbl><w:tr><w:tc>${inner}<w:p/></w:tc></w:tr></w:tbl>`;
      let body = `<w:p><w:r><w:t>Innermost cell.</w:t></w:r></w:p>`;
      for (let i = 0; i < levels; i++) body = cell(body);
      return { zip, xml: (await zip.file("word/document.xml")!.async("string")).replace("</w:body>", `${body}</w:body>`) };
    };
    const utf16 = (xml: string, order: "le" | "be") => {
      const units = Buffer.from(`\uFEFF${xml.replace(/encoding="UTF-8"/i, 'encoding="UTF-16"')}`, "utf16le");
      return order === "le" ? units : units.swap16();
    };
    const encodings = {
      "UTF-16LE": (xml: string) => utf16(xml, "le"),
      "UTF-16BE": (xml: string) => utf16(xml, "be"),
      // UTF-8 after a stray byte that began like a UTF-16 byte-order mark: the parser reads it as UTF-8 all the same.
      "UTF-8 after a stray 0xff": (xml: string) => Buffer.concat([Buffer.from([0xff]), Buffer.from(xml)]),
    };
    for (const [name, encode] of Object.entries(encodings)) {
      const { zip, xml } = await document(3000);
      zip.file("word/document.xml", encode(xml));
      // Before, such a part was not scanned: the stray byte's overflowed the parser's stack.
      const deep = await extractText(await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" }), DOCX_TYPE).catch((error: Error) => ({ text: "", error: error.message }));
      expect(deep, name).toEqual({ text: "", error: expect.stringMatching(/^The document is nested too deeply to read/) });
    }
    // A few levels in UTF-16 are not mistaken for thousands (read byte by byte, its closing tags are no tags).
    const { xml } = await document(5);
    expect(xmlDepthExceeds(utf16(xml, "le"), MAX_XML_DEPTH)).toBe(false);
    expect(xmlDepthExceeds(utf16(xml, "be"), MAX_XML_DEPTH)).toBe(false);
    expect(xmlDepthExceeds(utf16((await document(600)).xml, "le"), MAX_XML_DEPTH)).toBe(true);
  }, 60_000);

  it("a DOCX whose deeply nested document part is not named .xml is refused the same way, not a stack overflow", async () => {
    const zip = await JSZip.loadAsync(await makeDocx([{ text: "Before the tables." }]));
    const cell = (inner: string) => `<w:tbl><w:tr><w:tc>${inner}<w:p/></w:tc></w:tr></w:tbl>`;
    let body = `<w:p><w:r><w:t>Innermost cell.</w:t></w:r></w:p>`;
    for (let i = 0; i < 3000; i++) body = cell(body);
    const xml = (await zip.file("word/document.xml")!.async("string")).replace("</w:body>", `${body}</w:body>`);
    // The parser finds the main part through the package's relationships, whatever its name.
    zip.remove("word/document.xml");
    zip.file("word/document.part", xml);
    zip.file("_rels/.rels", (await zip.file("_rels/.rels")!.async("string")).replace('Target="word/document.xml"', 'Target="word/document.part"'));
    const bytes = await zip.generateAsync({ type: "nodebuffer", compression: "DEFLATE" });
    // Before, the depth check passed it (it reads .xml and .rels parts) and the parser overflowed its stack.
    const deep = await extractText(bytes, DOCX_TYPE).catch((error: Error) => ({ text: "", error: error.message }));
    expect(deep).toEqual({ text: "", error: expect.stringMatching(/^The document is nested too deeply to read/) });
  }, 60_000);

  it("a PDF is read up to 2000 pages, one page at a time, and says how many it read", async () => {
    const many = await makePdf(Array.from({ length: 2100 }, (_, i) => [`Folio ${i + 1} of the ledger.`]));
    const result = await extractText(many, "application/pdf");
    expect(result.error).toBe("Only the first 2000 of 2100 pages were read");
    expect(result.text).toContain("## Page 2000\n\nFolio 2000 of the ledger.");
    expect(result.text).not.toContain("Folio 2001");
    const few = await extractText(await makePdf([["First page."], [], ["Third page."]]), "application/pdf");
    expect(few).toEqual({ text: "## Page 1\n\nFirst page.\n\n## Page 3\n\nThird page.", error: "1 of 3 pages had no text" });
  }, 60_000);

  it("a picture in a DOCX is not inlined into the content as base64", async () => {
    const zip = await JSZip.loadAsync(await makeDocx([{ text: "Before the photo." }, { text: "After the photo." }]));
    zip.file("word/media/image1.png", makePng(400, 400));
    const types = await zip.file("[Content_Types].xml")!.async("string");
    zip.file("[Content_Types].xml", types.replace("<Default Extension=\"xml\"", `<Default Extension="png" ContentType="image/png"/><Default Extension="xml"`));
    const rels = await zip.file("word/_rels/document.xml.rels")!.async("string");
    zip.file(
      "word/_rels/document.xml.rels",
      rels.replace("</Relationships>", `<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="media/image1.png"/></Relationships>`),
    );
    const drawing =
      `<w:p><w:r><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"><wp:docPr id="1" name="Picture 1" descr="kiln photo"/>` +
      `<a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture">` +
      `<pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:blipFill><a:blip xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:embed="rId2"/></pic:blipFill></pic:pic>` +
      `</a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>`;
    const xml = await zip.file("word/document.xml")!.async("string");
    zip.file("word/document.xml", xml.replace("</w:p><w:p>", `</w:p>${drawing}<w:p>`));
    const docx = await zip.generateAsync({ type: "nodebuffer" });
    const memory = await processed(ann, (await upload(ann, "photo-notes.docx", DOCX_TYPE, docx)).id);
    expect(memory.processing_error).toBeNull();
    expect(memory.content).toContain("Before the photo.");
    expect(memory.content).toContain("After the photo.");
    expect(memory.content).not.toMatch(/base64|data:image/);
    expect(memory.content).toContain("(picture: kiln photo)");
  });

  it("a file missing from storage ends done with its note and a plain processing_error, not the server's paths", async () => {
    const created = await upload(ann, "rota.txt", "text/plain", Buffer.from("The quokka drill runs on Thursdays."), { content: "Hangar rota" });
    await processed(ann, created.id);
    const { fileRef } = await h.db.memory.findUniqueOrThrow({ where: { id: created.id }, select: { fileRef: true } });
    rmSync(path.join(blobDir, ...(fileRef as { object_key: string }).object_key.split("/")));
    await h.db.memory.update({ where: { id: created.id }, data: { content: "Hangar rota", extractedAt: null, processingStatus: "pending", processingAttempts: 0, processingError: null } });
    backgroundRunner()!.enqueue(created.id);
    const deadline = Date.now() + 30_000;
    let memory;
    do {
      await new Promise((r) => setTimeout(r, 50));
      memory = (await ann.get(`/v1/memories/${created.id}`)).body.data;
    } while (memory.processing_status !== "done" && !memory.processing_error && Date.now() < deadline);
    expect(memory.processing_error).not.toContain(blobDir);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", content: "Hangar rota", processing_error: expect.stringMatching(/no longer in storage/) });
  });

  it("a reader that dies mid-file is not the file's fault: the job is retried and reads the file", async () => {
    // Lists nested deep: seconds of reading, time enough to kill the reader in the middle.
    const slow = Buffer.from(`<html><body>${"<ul><li>Some words in a list item.".repeat(120).concat("</li></ul>".repeat(120)).repeat(20)}</body></html>`);
    const created = await upload(ann, "nested.html", "text/html", slow, { content: "Nested lists" });
    // The process's extraction thread (extraction-thread.ts), made on first use.
    const thread = () => (globalThis as unknown as { __engramExtractionThread?: { live?: { onEnd?: unknown; worker: { terminate(): Promise<number> } } } }).__engramExtractionThread;
    // Killed while the file is in the worker (its task in flight: the lane's onEnd is set), however slow the machine is.
    const deadline = Date.now() + 30_000;
    while (!thread()?.live?.onEnd && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(thread()?.live?.onEnd).toBeDefined();
    await thread()!.live!.worker.terminate();
    // Before, the death was recorded as the file being unreadable for good: done with only its note and
    // "The file could not be read: the reader stopped unexpectedly".
    const memory = await processed(ann, created.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect(memory.content).toContain("Some words in a list item.");
  }, 90_000);

  it("HTML goes through Readability; CSV and JSON are read as text", async () => {
    const html = Buffer.from(
      `<html><head><title>Deploy guide</title></head><body><nav>Home | About</nav><article><h1>Deploy guide</h1>` +
        `<p>${"Blue green deploys keep the previous fleet warm until the health checks of the new fleet pass. ".repeat(4)}</p>` +
        `<p>Rollback means pointing the balancer at the previous fleet.</p></article><script>alert(1)</script></body></html>`,
    );
    const page = await processed(ann, (await upload(ann, "guide.html", "text/html", html)).id);
    expect(page.content).toContain("Blue green deploys");
    expect(page.content).not.toContain("alert(1)");
    const csv = await processed(ann, (await upload(ann, "people.csv", "text/csv", Buffer.from("name,team\nOrla,platform\nIvo,billing\n"))).id);
    expect(csv.content).toContain("Orla,platform");
    const json = await processed(ann, (await upload(ann, "conf.json", "application/json", Buffer.from('{"retention_days": 30}'))).id);
    expect(json.content).toContain("retention_days");
  });

  it("text and HTML files are read in their charset: the BOM, the upload's declared charset, an HTML <meta> charset", async () => {
    // Windows-1252 as editors on Windows save it: the curly quotes, the dash and € are bytes 0x80-0x9F.
    const cp1252 = (text: string) =>
      Buffer.from([...text].map((c) => ({ "€": 0x80, "–": 0x96, "“": 0x93, "”": 0x94 })[c] ?? c.charCodeAt(0)));
    const sentence = "The café’s “naïve” budget – €1200 – was approved.".replace("’", "'");
    const declared = await processed(ann, (await upload(ann, "budget.txt", "text/plain; charset=windows-1252", cp1252(sentence))).id);
    expect(declared).toMatchObject({ state: "active", processing_error: null });
    expect(declared.content).toContain(sentence);

    const meta = cp1252(
      `<html><head><meta charset="windows-1252"><title>Café notes</title></head><body><article><h1>Café notes</h1>` +
        `<p>${`${sentence} `.repeat(5)}</p></article></body></html>`,
    );
    const page = await processed(ann, (await upload(ann, "cafe.html", "text/html", meta)).id);
    expect(page.processing_error).toBeNull();
    expect(page.content).toContain(sentence);

    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("Die Größe des Lagers: 40 m².", "utf16le")]);
    const bom = await processed(ann, (await upload(ann, "lager.txt", "text/plain", utf16)).id);
    expect(bom.content).toContain("Die Größe des Lagers: 40 m².");

    // Bytes that are text in no charset stay refused, whatever charset is declared.
    const binary = Buffer.from([0x80, 0x00, 0x01, 0x9f, 0xff, 0x00, 0x10, 0x00]);
    const i = await intent(ann, "fake.txt", "text/plain; charset=windows-1252", binary.length);
    expect((await put(i.upload_url, i.headers, binary)).status).toBe(200);
    expect((await ann.post("/v1/memories", { file_ref: i.file_ref })).status).toBe(415);
  });

  it("a PNG keeps its size; with no vision model it is active with a processing_error, never stuck", async () => {
    const png = makePng(32, 20);
    const created = await upload(ann, "diagram.png", "image/png", png, { hint: "architecture sketch" });
    const memory = await processed(ann, created.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done" });
    expect(memory.processing_error).toMatch(/No text was found in the image/);
    expect(memory.content).toContain("diagram.png");
    expect(memory.attachments[0]).toMatchObject({ width: 32, height: 20, inline_eligible: true });
    const view = await ann.post(`/v1/memories/${created.id}/attachments/${memory.attachments[0].id}/view-url`);
    expect(view.status).toBe(200);
    expect(view.body.data.expires_at).toBeGreaterThan(Date.now() / 1000);
    const shown = await dispatch(new Request(view.body.data.url));
    expect(shown.status).toBe(200);
    expect(shown.headers.get("content-disposition")).toMatch(/^inline/);
    expect(Buffer.from(await shown.arrayBuffer()).equals(png)).toBe(true);
    // The view URL is for that file only.
    const other = view.body.data.url.replace(/filename=[^&]+/, "filename=evil.html");
    expect((await dispatch(new Request(other))).status).toBe(403);
  });

  it("a PNG whose header claims a size past 2^31 - 1 pixels is attached without a size, not a 500", async () => {
    const png = makePng(1, 1);
    png.writeUInt32BE(0xffffffff, 16);
    png.writeUInt32BE(0x80000000, 20);
    const i = await intent(ann, "huge.png", "image/png", png.length);
    expect((await put(i.upload_url, i.headers, png)).status).toBe(200);
    const res = await ann.post("/v1/memories", { content: "", file_ref: i.file_ref });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const memory = (await ann.get(`/v1/memories/${res.body.data.id}`)).body.data;
    expect(memory.attachments[0]).toMatchObject({ width: null, height: null });
  });

  it("an empty text file ends active with a processing_error", async () => {
    const created = await upload(ann, "blank.txt", "text/plain", Buffer.from("   \n"));
    const memory = await processed(ann, created.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: "The file is empty" });
  });

  it("a file_ref's filename follows the upload's rules: no slashes, not blank (it names the file every download saves)", async () => {
    const bytes = Buffer.from("Named with care.\n");
    const i = await intent(ann, "care.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    for (const filename of ["../../.bashrc", "..\\..\\evil.exe", "   "]) {
      const res = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, filename } });
      expect(res.status, `${filename}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect(await h.db.attachment.count({ where: { objectKey: i.object_key } })).toBe(0);
    const res = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, filename: "  care (final).txt " } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.title).toBe("care (final).txt");
  });

  it("refuses a .png that is really a PDF, a wrong sha256, a wrong size and another user's upload", async () => {
    const pdf = await makePdf([["not a picture"]]);
    const i = await intent(ann, "photo.png", "image/png", pdf.length);
    expect((await put(i.upload_url, i.headers, pdf)).status).toBe(200);
    const fake = await ann.post("/v1/memories", { file_ref: i.file_ref });
    expect(fake.status).toBe(415);
    expect(fake.body.error).toMatchObject({ code: "unsupported_content_type", details: { content_type: "image/png", detected: "application/pdf" } });

    const text = Buffer.from("some notes\n");
    const t = await intent(ann, "n.txt", "text/plain", text.length);
    expect((await put(t.upload_url, t.headers, text)).status).toBe(200);
    const badHash = await ann.post("/v1/memories", { file_ref: { ...t.file_ref, sha256: "0".repeat(64) } });
    expect(badHash.status).toBe(400);
    expect(badHash.body.error.message).toMatch(/sha256/);
    const badSize = await ann.post("/v1/memories", { file_ref: { ...t.file_ref, size_bytes: 3 } });
    expect(badSize.status).toBe(400);
    const stolen = await bob.post("/v1/memories", { file_ref: t.file_ref });
    expect(stolen.status).toBe(400);
    expect(stolen.body.error.message).toMatch(/not name an upload of yours/);
    // Without size_bytes and sha256, with empty content: accepted.
    const { size_bytes: _omit, ...noSize } = t.file_ref;
    const ok = await ann.post("/v1/memories", { content: "", file_ref: noSize });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.data.title).toBe("n.txt");
    // Attached once only.
    expect((await ann.post("/v1/memories", { content: "again", file_ref: noSize })).status).toBe(409);
  });

  it("a file pushed again under its source_path replaces the original in place (the same file changes nothing)", async () => {
    const push = async (bytes: Buffer) => {
      const i = await intent(ann, "notes.txt", "text/plain", bytes.length);
      expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
      return ann.post("/v1/memories", { content: "", source_path: "docs/notes.txt", file_ref: { ...i.file_ref, sha256: sha256(bytes) } });
    };
    const first = await push(Buffer.from("first version of the on-call notes\n"));
    expect(first.status, first.text).toBe(201);
    const v1 = await processed(ann, first.body.data.id);
    expect(v1.content).toContain("first version");
    const oldKey = (await h.db.attachment.findFirstOrThrow({ where: { memoryId: v1.id } })).objectKey;
    const oldFile = path.join(blobDir, ...oldKey.split("/"));

    const again = await push(Buffer.from("first version of the on-call notes\n"));
    expect(again.status, again.text).toBe(200);
    expect(again.body.data).toMatchObject({ id: v1.id, version: 1, processing_status: "done" });
    expect(existsSync(oldFile)).toBe(true);

    const second = await push(Buffer.from("second version: page the secondary after 10 minutes\n"));
    expect(second.status, second.text).toBe(200);
    expect(second.body.data).toMatchObject({ id: v1.id, version: 2, state: "processing", title: "notes.txt" });
    const v2 = await processed(ann, v1.id);
    expect(v2.content).toContain("second version");
    expect(v2.content).not.toContain("first version");
    expect(v2.attachments).toEqual([expect.objectContaining({ filename: "notes.txt", sha256: sha256(Buffer.from("second version: page the secondary after 10 minutes\n")) })]);
    // The replaced original is gone, bytes and record.
    expect(existsSync(oldFile)).toBe(false);
    expect(await h.db.upload.count({ where: { objectKey: oldKey } })).toBe(0);
    expect(await h.db.memory.count({ where: { sourcePath: "docs/notes.txt" } })).toBe(1);
  });

  it("the same file pushed again with the same content still takes the kind, stability, agents and reason it names (no new version)", async () => {
    // The early return for an unchanged file skipped them: `memax push report.txt --kind procedural` a
    // second time answered 200 with kind and kind_locked unchanged, though a text re-push applies them.
    const bytes = Buffer.from("quarterly report: the backlog halved after the queue fix\n");
    const push = async (extra: Record<string, unknown>) => {
      const i = await intent(ann, "report.txt", "text/plain", bytes.length);
      expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
      return ann.post("/v1/memories", { content: "", source_path: "docs/report.txt", file_ref: { ...i.file_ref, sha256: sha256(bytes) }, ...extra });
    };
    const first = await push({});
    expect(first.status, first.text).toBe(201);
    const v1 = await processed(ann, first.body.data.id);
    const again = await push({ kind: "procedural", stability: "stable", source_agent: "memax", assisted_by_agent: "claude-code", hub_reason: "the team reads it" });
    expect(again.status, again.text).toBe(200);
    expect(again.body.data).toMatchObject({ id: v1.id, version: 1, processing_status: "done", kind: "procedural", stability: "stable" });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } })).toMatchObject({
      version: 1,
      processingStatus: "done",
      kind: "procedural",
      kindLocked: true,
      stability: "stable",
      stabilityLocked: true,
      sourceAgent: "memax",
      assistedByAgent: "claude-code",
      hubReason: "the team reads it",
    });
    // Nothing named, nothing written: the row is as it was.
    const before = await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } });
    expect((await push({})).status).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } })).updatedAt).toEqual(before.updatedAt);
    // The same project_context again (Memax's CLI sends it with every push from a repo) writes nothing either:
    // compared by value, not as an object that is never the stored JSON.
    expect((await push({ project_context: { repo: "acme/web", branch: "main" } })).status).toBe(200);
    const named = await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } });
    expect((await push({ project_context: { branch: "main", repo: "acme/web" } })).status).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: v1.id } })).updatedAt).toEqual(named.updatedAt);
  });

  it("text pushed to a file memory's source_path replaces the file: its original, record and bytes go, in one write", async () => {
    const bytes = Buffer.from("the old runbook, kept as a file: restart the queue by hand\n");
    const i = await intent(ann, "runbook.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    const file = await ann.post("/v1/memories", { content: "", source_path: "docs/runbook", file_ref: { ...i.file_ref, sha256: sha256(bytes) } });
    expect(file.status, file.text).toBe(201);
    await processed(ann, file.body.data.id);
    const oldFile = path.join(blobDir, ...i.object_key.split("/"));
    expect(existsSync(oldFile)).toBe(true);

    const text = await ann.post("/v1/memories", { content: "# Runbook\n\nThe queue restarts itself now.", source_path: "docs/runbook" });
    expect(text.status, text.text).toBe(200);
    expect(text.body.data).toMatchObject({ id: file.body.data.id, version: 2, content_type: "markdown", title: "Runbook" });
    const memory = await processed(ann, file.body.data.id);
    expect(memory).toMatchObject({ content: "# Runbook\n\nThe queue restarts itself now.", attachments: [], processing_error: null });
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: memory.id } });
    expect(row).toMatchObject({ fileRef: null, attachmentBytes: 0n, extractedAt: null });
    // The replaced original is no longer referenced: its record and bytes go, as a replaced file's do.
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(0);
    expect(existsSync(oldFile)).toBe(false);
    expect(await h.db.attachment.count({ where: { memoryId: memory.id } })).toBe(0);
  });

  it("an archived file memory given a new file at its source_path is live again and superseded by nothing", async () => {
    const push = async (bytes: Buffer) => {
      const i = await intent(ann, "kiln.txt", "text/plain", bytes.length);
      expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
      return ann.post("/v1/memories", { content: "", source_path: "docs/kiln.txt", file_ref: { ...i.file_ref, sha256: sha256(bytes) } });
    };
    const kept = await ann.post("/v1/memories", { content: "Kiln notes a dream kept over the file." });
    const first = await push(Buffer.from("fire to cone six\n"));
    expect(first.status, first.text).toBe(201);
    await processed(ann, first.body.data.id);
    // As a dream's merge leaves it: archived, naming the memory it was merged into.
    await h.db.memory.update({ where: { id: first.body.data.id }, data: { state: "archived", supersededBy: kept.body.data.id } });

    const second = await push(Buffer.from("fire to cone five, then hold\n"));
    expect(second.status, second.text).toBe(200);
    expect(second.body.data).toMatchObject({ id: first.body.data.id, state: "processing" });
    expect(await processed(ann, first.body.data.id)).toMatchObject({ state: "active" });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id: first.body.data.id } })).toMatchObject({ state: "active", supersededBy: null });
  });

  it("deleting the memory deletes its file; unattached uploads are swept after 24 hours", async () => {
    const bytes = Buffer.from("to be deleted\n");
    const created = await upload(ann, "gone.txt", "text/plain", bytes);
    await processed(ann, created.id);
    const key = (await h.db.attachment.findFirstOrThrow({ where: { memoryId: created.id } })).objectKey;
    const file = path.join(blobDir, ...key.split("/"));
    expect(existsSync(file)).toBe(true);
    expect((await ann.delete(`/v1/memories/${created.id}`)).status).toBe(200);
    expect(existsSync(file)).toBe(false);
    expect(await h.db.upload.count({ where: { objectKey: key } })).toBe(0);

    const lonely = await intent(ann, "lonely.txt", "text/plain", 4);
    expect((await put(lonely.upload_url, lonely.headers, Buffer.from("solo"))).status).toBe(200);
    const lonelyFile = path.join(blobDir, ...lonely.object_key.split("/"));
    await sweepUploads(h.db, new Date(Date.now() + 23 * 3600_000));
    expect(existsSync(lonelyFile)).toBe(true);
    await sweepUploads(h.db, new Date(Date.now() + 25 * 3600_000));
    expect(existsSync(lonelyFile)).toBe(false);
    expect(await h.db.upload.count({ where: { objectKey: lonely.object_key } })).toBe(0);
  });

  it("with Inngest the sweep is the cron function sweep-uploads (@inngest/test), batch by batch", async () => {
    const old = await intent(ann, "old.txt", "text/plain", 3);
    expect((await put(old.upload_url, old.headers, Buffer.from("old"))).status).toBe(200);
    const fresh = await intent(ann, "fresh.txt", "text/plain", 5);
    expect((await put(fresh.upload_url, fresh.headers, Buffer.from("fresh"))).status).toBe(200);
    await h.db.upload.updateMany({ where: { objectKey: old.object_key }, data: { createdAt: new Date(Date.now() - 25 * 3600_000) } });
    const oldFile = path.join(blobDir, ...old.object_key.split("/"));
    const freshFile = path.join(blobDir, ...fresh.object_key.split("/"));
    const { result, ctx } = await new InngestTestEngine({ function: sweepUploadsFunction }).execute();
    expect(result).toEqual({ removed: 1 });
    expect(ctx.step.run).toHaveBeenCalledWith("sweep-0", expect.any(Function));
    // One batch (fewer than 200 went), then the part files cut off by a crash.
    expect(ctx.step.run).toHaveBeenCalledWith("sweep-partials", expect.any(Function));
    expect(ctx.step.run).toHaveBeenCalledTimes(2);
    expect(existsSync(oldFile)).toBe(false);
    expect(await h.db.upload.count({ where: { objectKey: old.object_key } })).toBe(0);
    expect(existsSync(freshFile)).toBe(true);
    expect(await h.db.upload.count({ where: { objectKey: fresh.object_key } })).toBe(1);
  });

  it("a PUT cut off by a crash leaves a part file the sweep removes once older than an upload URL lives, never one still being written", async () => {
    const userDir = path.join(blobDir, "uploads", ann.id);
    mkdirSync(userDir, { recursive: true });
    // What a crash mid-PUT leaves next to where the object would have gone (the cleanup never ran).
    const crashed = path.join(userDir, "01a00000-0000-7000-8000-000000000001.part-0123456789ab");
    const recent = path.join(userDir, "01a00000-0000-7000-8000-000000000002.part-ba9876543210");
    writeFileSync(crashed, "half an upl");
    writeFileSync(recent, "half an upl");
    const past = new Date(Date.now() - (UPLOAD_URL_TTL_SECONDS + 60) * 1000);
    utimesSync(crashed, past, past);
    // A PUT in progress whose client stalled past that long: still being written, so it stays.
    const i = await intent(ann, "stalled.txt", "text/plain", 8);
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const stalled = put(i.upload_url, i.headers, new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) }));
    feed.enqueue(new Uint8Array(Buffer.from("stal")));
    const id = i.object_key.split("/").pop()!;
    const partOf = () => readdirSync(userDir).find((f) => f.startsWith(`${id}.part-`));
    await vi.waitFor(() => expect(partOf()).toBeDefined());
    const inFlight = path.join(userDir, partOf()!);
    utimesSync(inFlight, past, past);
    try {
      expect(await sweepPartialUploads()).toBe(1);
      expect(existsSync(crashed)).toBe(false);
      expect(existsSync(recent)).toBe(true);
      expect(existsSync(inFlight)).toBe(true);
    } finally {
      feed.enqueue(new Uint8Array(Buffer.from("led!")));
      feed.close();
    }
    expect((await stalled).status).toBe(200);
    // The in-process sweeper runs it too, after the upload records.
    utimesSync(recent, past, past);
    const stop = startUploadSweeper(async () => h.db, 50);
    try {
      await vi.waitFor(() => expect(existsSync(recent)).toBe(false), { timeout: 5000 });
    } finally {
      stop();
    }
  });

  it("a PUT stalled past an upload URL's life keeps its part file fresh, so another instance's sweep on the same disk leaves it", async () => {
    const userDir = path.join(blobDir, "uploads", ann.id);
    const i = await intent(ann, "slow.txt", "text/plain", 8);
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    let stalled: ReturnType<typeof put>;
    try {
      stalled = put(i.upload_url, i.headers, new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) }));
      feed.enqueue(new Uint8Array(Buffer.from("slow")));
      const id = i.object_key.split("/").pop()!;
      const partOf = () => readdirSync(userDir).find((f) => f.startsWith(`${id}.part-`));
      await vi.waitFor(() => expect(partOf()).toBeDefined());
      const inFlight = path.join(userDir, partOf()!);
      // Its client quiet for longer than an upload URL lives: the last bytes came that long ago.
      const past = new Date(Date.now() - (UPLOAD_URL_TTL_SECONDS + 60) * 1000);
      utimesSync(inFlight, past, past);
      await vi.advanceTimersByTimeAsync(60_000);
      await vi.waitFor(async () => expect((await stat(inFlight)).mtimeMs).toBeGreaterThan(past.getTime()), { timeout: 2000 });
      // Another instance (its own module, so its own set of files in writing) sweeping the shared disk.
      const otherInstance = "@/lib/blobs/local-blob-store.ts?instance=other";
      const other = (await import(/* @vite-ignore */ otherInstance)) as typeof import("@/lib/blobs/local-blob-store.ts");
      expect(await new other.LocalBlobStore(blobDir).sweepPartials(new Date(Date.now() - UPLOAD_URL_TTL_SECONDS * 1000))).toBe(0);
      expect(existsSync(inFlight)).toBe(true);
    } finally {
      vi.useRealTimers();
      feed.enqueue(new Uint8Array(Buffer.from("less")));
      feed.close();
    }
    expect((await stalled).status).toBe(200);
  });

  it("deleting a hub deletes the files of its memories", async () => {
    const hubId = await h.teamHub(ann);
    const bytes = Buffer.from("team file\n");
    const i = await intent(ann, "team.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    const created = await ann.post("/v1/memories", { file_ref: i.file_ref }, { headers: { "x-hub-id": hubId } });
    expect(created.status).toBe(201);
    await processed(ann, created.body.data.id);
    const file = path.join(blobDir, ...i.object_key.split("/"));
    expect(existsSync(file)).toBe(true);
    expect((await ann.delete(`/v1/hubs/${hubId}`)).status).toBe(200);
    expect(existsSync(file)).toBe(false);
    await backgroundRunner()?.idle();
  });
});

describe("a file deleted while it is being served", () => {
  /** The embedded store, with the file deleted right after each head: a concurrent delete between the existence check and the read. */
  class DeletedAfterHead extends LocalBlobStore {
    override async head(key: string) {
      const info = await super.head(key);
      if (info) await this.delete(key);
      return info;
    }
  }

  it("answers a 404 envelope on the download and on a signed URL, never a 500", async () => {
    const bytes = Buffer.from("The heron count is on Saturdays.");
    const first = await upload(ann, "herons.txt", "text/plain", bytes, { content: "Heron count" });
    const second = await upload(ann, "egrets.txt", "text/plain", Buffer.from("The egret count is on Sundays."), { content: "Egret count" });
    await Promise.all([first, second].map((m) => processed(ann, m.id)));
    const [a, b] = await Promise.all([first, second].map((m) => h.db.attachment.findFirstOrThrow({ where: { memoryId: m.id } })));
    const options = { filename: "egrets.txt", contentType: "text/plain", inline: false, expiresIn: 300, baseUrl: "http://engram.test" };
    setBlobStore(new DeletedAfterHead(blobDir));
    try {
      const download = await dispatch(
        new Request(`http://engram.test/v1/memories/${first.id}/attachments/${a!.id}/download`, { headers: { authorization: `Bearer ${ann.key}` } }),
      );
      expect(download.status).toBe(404);
      expect(await download.json()).toMatchObject({ error: { code: "not_found" } });
      const signed = await (await blobStore()).signDownload(b!.objectKey, options);
      const viaUrl = await dispatch(new Request(signed));
      expect(viaUrl.status).toBe(404);
      expect(await viaUrl.json()).toMatchObject({ error: { code: "not_found" } });
    } finally {
      setBlobStore(new LocalBlobStore(blobDir));
    }
  });
});

describe("serving an attachment", () => {
  it.skipIf(testPostgres())("reads the file's reference, not the memory's whole text, and still only for a caller who can read the memory", async () => {
    const png = makePng(8, 8);
    const created = await upload(ann, "map.png", "image/png", png);
    const memory = await processed(ann, created.id);
    const attachmentId = memory.attachments[0].id;
    // A memory whose extracted text is about 1 MB, as a long PDF's is.
    await h.db.memory.update({ where: { id: created.id }, data: { content: "The survey map of the marsh. ".repeat(35_000) } });
    const base = `http://engram.test/v1/memories/${created.id}/attachments/${attachmentId}`;
    const get = (key: string) => dispatch(new Request(`${base}/download`, { headers: { authorization: `Bearer ${key}` } }));
    let download: Response | undefined;
    let view: Awaited<ReturnType<Client["post"]>> | undefined;
    const read = await charactersRead(h.database, async () => {
      download = await get(ann.key);
      view = await ann.post(`/v1/memories/${created.id}/attachments/${attachmentId}/view-url`);
    });
    expect(download!.status).toBe(200);
    expect(Buffer.from(await download!.arrayBuffer()).equals(png)).toBe(true);
    expect(view!.status).toBe(200);
    // Both used to load the whole memory row (1 MB each) only to learn that the caller may read it.
    expect(read).toBeLessThan(50_000);
    const outsider = await get(bob.key);
    expect(outsider.status).toBe(404);
    expect(await outsider.json()).toMatchObject({ error: { code: "not_found" } });
    expect((await bob.post(`/v1/memories/${created.id}/attachments/${attachmentId}/view-url`)).status).toBe(404);
  });
});

describe("an upload's life ends for good", () => {
  it("a signed PUT URL is refused once its upload was attached and deleted: no bytes land that nothing refers to", async () => {
    const bytes = Buffer.from("written once\n");
    const i = await intent(ann, "once.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    const created = await ann.post("/v1/memories", { content: "", file_ref: i.file_ref });
    expect(created.status).toBe(201);
    await processed(ann, created.body.data.id);
    // Attached: the URL (still within its 15 minutes) writes nothing.
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(409);
    expect((await ann.delete(`/v1/memories/${created.body.data.id}`)).status).toBe(200);
    const file = path.join(blobDir, ...i.object_key.split("/"));
    expect(existsSync(file)).toBe(false);
    const again = await put(i.upload_url, i.headers, bytes);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("conflict");
    expect(existsSync(file)).toBe(false);
  });

  it("a PUT whose file description cannot be written keeps its bytes: a create that attached them meanwhile keeps a file that is there", async () => {
    // Bytes in place are an object (head() reports them by size alone, the create hashes them), so a
    // create racing the PUT attaches them before the description is written. The PUT deleted them when
    // that write failed, and answered 500: the memory pointed at a file that was gone.
    const bytes = Buffer.from("described at last");
    const i = await intent(ann, "described.txt", "text/plain", bytes.length);
    const file = path.join(blobDir, ...i.object_key.split("/"));
    // Something in the way of the sidecar (as a full disk would refuse it) once the bytes are in place.
    mkdirSync(`${file}.meta.json`, { recursive: true });
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const sent = await put(i.upload_url, i.headers, bytes);
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);
      expect(sent.body.data).toEqual({ object_key: i.object_key, size_bytes: bytes.length, sha256: sha256(bytes) });
      expect(logged).toHaveBeenCalled();
    } finally {
      logged.mockRestore();
    }
    expect(existsSync(file)).toBe(true);
    // What a full disk leaves: no metadata (only this test's obstacle stood in its place).
    rmSync(`${file}.meta.json`, { recursive: true });
    const res = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: sha256(bytes) } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const memory = await processed(ann, res.body.data.id);
    expect(memory.processing_status).toBe("done");
    expect(memory.content).toContain("described at last");
    // Uploaded: the same URL writes nothing over it.
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(409);
  });

  it("a disk error while receiving a PUT is the server's (a logged 500), not the client's 400; only a client that stopped sending gets the 400", async () => {
    // A user of its own: the object's directory (the user's) is what the disk refuses here.
    const dora = await h.user("Dora");
    const bytes = Buffer.from("the disk said no");
    const i = await intent(dora, "refused.txt", "text/plain", bytes.length);
    const file = path.join(blobDir, ...i.object_key.split("/"));
    // A file where the object's directory goes: refused by the disk (ENOTDIR or EEXIST), not the client.
    mkdirSync(path.dirname(path.dirname(file)), { recursive: true });
    writeFileSync(path.dirname(file), "in the way");
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const res = await put(i.upload_url, i.headers, bytes);
      expect(res.status, JSON.stringify(res.body)).toBe(500);
      expect(res.body.error.code).toBe("internal");
      expect(JSON.stringify(res.body)).not.toMatch(/did not complete|ENOTDIR|EEXIST|uploads\//);
      expect(logged).toHaveBeenCalled();
    } finally {
      logged.mockRestore();
      rmSync(path.dirname(file));
    }
    // A body that fails mid-way (the client went away) is still the client's: 400, nothing kept.
    const broken = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(bytes.subarray(0, 4)));
        setTimeout(() => controller.error(new Error("connection reset")), 20);
      },
    });
    const cut = await put(i.upload_url, i.headers, broken);
    expect(cut.status, JSON.stringify(cut.body)).toBe(400);
    expect(cut.body.error.message).toMatch(/did not complete/);
    expect(readdirSync(path.dirname(file)).filter((f) => f.startsWith(path.basename(file)))).toEqual([]);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
  });

  it("of two PUTs racing on one URL, the one that finishes second is refused and the first one's bytes stay", async () => {
    const i = await intent(ann, "race.txt", "text/plain", 8);
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const slowBody = new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) });
    const slow = put(i.upload_url, i.headers, slowBody);
    feed.enqueue(new Uint8Array(Buffer.from("slow")));
    await new Promise((r) => setTimeout(r, 50)); // the slow PUT is past its checks, streaming
    expect((await put(i.upload_url, i.headers, Buffer.from("fastfast"))).status).toBe(200);
    feed.enqueue(new Uint8Array(Buffer.from("slow")));
    feed.close();
    expect((await slow).status).toBe(409);
    const store = new LocalBlobStore(blobDir);
    expect((await store.head(i.object_key))?.sha256).toBe(sha256(Buffer.from("fastfast")));
    expect(readdirSync(path.dirname(path.join(blobDir, ...i.object_key.split("/")))).filter((f) => f.includes(".part-"))).toEqual([]);
  });

  it("a PUT still streaming when its upload is removed (the account emptied) is refused at its end and leaves no bytes that nothing refers to", async () => {
    const eve = await h.user("Eve");
    const i = await intent(eve, "late.txt", "text/plain", 8);
    const file = path.join(blobDir, ...i.object_key.split("/"));
    let feed!: ReadableStreamDefaultController<Uint8Array>;
    const slowBody = new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) });
    const slow = put(i.upload_url, i.headers, slowBody);
    feed.enqueue(new Uint8Array(Buffer.from("late")));
    // Its part file exists once it is past assertUploadOpen and streaming: emptied earlier, the PUT was
    // refused at its start and the check after the bytes landed went untested.
    const partDir = path.dirname(file);
    for (const deadline = Date.now() + 10_000; !(existsSync(partDir) && readdirSync(partDir).some((f) => f.startsWith(`${path.basename(file)}.part-`))); ) {
      if (Date.now() > deadline) throw new Error("the PUT never started streaming");
      await new Promise((r) => setTimeout(r, 5));
    }
    const emptied = await eve.delete("/v1/account/data");
    expect(emptied.status, JSON.stringify(emptied.body)).toBe(200);
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(0);
    feed.enqueue(new Uint8Array(Buffer.from("late")));
    feed.close();
    const res = await slow;
    expect(res.status, JSON.stringify(res.body)).toBe(409);
    expect(res.body.error.code).toBe("conflict");
    expect(res.body.error.message).toMatch(/removed while its bytes arrived/);
    // No record names the object any more, so no sweep would ever remove it.
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.meta.json`)).toBe(false);
  });

  it("an upload too close to the sweep's 24 hours is not attached (the sweep could be deleting it)", async () => {
    const bytes = Buffer.from("almost swept");
    const i = await intent(ann, "old.txt", "text/plain", bytes.length);
    expect((await put(i.upload_url, i.headers, bytes)).status).toBe(200);
    await h.db.upload.updateMany({ where: { objectKey: i.object_key }, data: { createdAt: new Date(Date.now() - 23.5 * 3600_000) } });
    const res = await ann.post("/v1/memories", { content: "", file_ref: i.file_ref });
    expect(res.status).toBe(409);
    expect(res.body.error.message).toMatch(/too old/);
    expect(await h.db.upload.count({ where: { objectKey: i.object_key, attachedAt: { not: null } } })).toBe(0);
  });

  it("a file's text is held to the storage quota when it is read in: over it, the memory keeps its note and says why", async () => {
    const cal = await h.user("Cal");
    process.env.ENGRAM_QUOTA_USER_BYTES = "2000";
    try {
      // The file itself (1,101 bytes) fits the quota; its text read in would be as much again.
      const text = Buffer.from(`${"A long report line about quarterly numbers. ".repeat(25)}\n`);
      const created = await upload(cal, "report.txt", "text/plain", text);
      const done = await processed(cal, created.id);
      expect(done.processing_error).toMatch(/storage quota/);
      expect((await h.db.memory.findUniqueOrThrow({ where: { id: created.id } })).content).toBe("");
      expect((await storageUsage(h.db, "user", cal.id)).bytes).toBeLessThanOrEqual(2000);
    } finally {
      delete process.env.ENGRAM_QUOTA_USER_BYTES;
    }
  });

  it("a file counts toward the storage quota as /v1/usage reports it: an attach past the limit is 413 quota_exceeded and attaches nothing", async () => {
    const dee = await h.user("Dee");
    const first = Buffer.from(`${"x".repeat(1499)}\n`);
    const second = Buffer.from(`${"y".repeat(999)}\n`);
    process.env.ENGRAM_QUOTA_USER_BYTES = "2000";
    try {
      const kept = await upload(dee, "first.txt", "text/plain", first);
      await processed(dee, kept.id);
      const usage = (await dee.get("/v1/usage")).body.data;
      expect(usage.storage_bytes).toBe(first.length);
      expect(usage.limits.storage_bytes_limit).toBe(2000);
      expect(await storageUsage(h.db, "hub", dee.personalHubId)).toEqual({ bytes: first.length, memories: 1 });
      // 1500 stored and 1000 more: the reported figure would pass the limit.
      const i = await intent(dee, "second.txt", "text/plain", second.length);
      expect((await put(i.upload_url, i.headers, second)).status).toBe(200);
      const refused = await dee.post("/v1/memories", { content: "", file_ref: i.file_ref });
      expect(refused.status, JSON.stringify(refused.body)).toBe(413);
      expect(refused.body.error).toMatchObject({
        code: "quota_exceeded",
        details: { scope: "user", resource: "bytes", limit: 2000, used: first.length, requested: second.length },
      });
      expect(await h.db.attachment.count({ where: { objectKey: i.object_key } })).toBe(0);
      expect(await h.db.upload.count({ where: { objectKey: i.object_key, attachedAt: null } })).toBe(1);
      expect((await dee.get("/v1/usage")).body.data.storage_bytes).toBe(first.length);
      // Deleting the first file frees its bytes: the same upload now fits.
      expect((await dee.delete(`/v1/memories/${kept.id}`)).status).toBe(200);
      expect(await storageUsage(h.db, "user", dee.id)).toEqual({ bytes: 0, memories: 0 });
      const admitted = await dee.post("/v1/memories", { content: "", file_ref: i.file_ref });
      expect(admitted.status, JSON.stringify(admitted.body)).toBe(201);
      expect((await dee.get("/v1/usage")).body.data.storage_bytes).toBe(second.length);
    } finally {
      delete process.env.ENGRAM_QUOTA_USER_BYTES;
    }
  });

  it("a sweep whose deletes fail counts nothing removed, so the hourly loop stops instead of retrying the same rows for ever", async () => {
    const i = await intent(ann, "stuck.txt", "text/plain", 5);
    expect((await put(i.upload_url, i.headers, Buffer.from("stuck"))).status).toBe(200);
    class RefusingStore extends LocalBlobStore {
      override async delete(): Promise<void> {
        throw new Error("AccessDenied");
      }
    }
    setBlobStore(new RefusingStore(blobDir));
    try {
      expect(await sweepUploads(h.db, new Date(Date.now() + 25 * 3600_000))).toBe(0);
      expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(1);
    } finally {
      setBlobStore(new LocalBlobStore(blobDir));
    }
    expect(await sweepUploads(h.db, new Date(Date.now() + 25 * 3600_000))).toBeGreaterThanOrEqual(1);
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(0);
  });
});

describe("download headers", () => {
  const download = (client: Client, memoryId: string, attachmentId: string) =>
    dispatch(new Request(`http://engram.test/v1/memories/${memoryId}/attachments/${attachmentId}/download`, { headers: { authorization: `Bearer ${client.key}` } }));

  it("a filename with an apostrophe, parentheses or a star is percent-encoded in filename* (RFC 8187 allows none of them there)", async () => {
    const name = `Ann's "notes" (final)*.txt`;
    const created = await upload(ann, name, "text/plain", Buffer.from("Quarterly notes.\n"));
    const memory = await processed(ann, created.id);
    const res = await download(ann, created.id, memory.attachments[0].id);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const disposition = res.headers.get("content-disposition")!;
    expect(disposition).toBe(`attachment; filename="Ann's _notes_ (final)*.txt"; filename*=UTF-8''Ann%27s%20%22notes%22%20%28final%29%2A.txt`);
    // Every character of the extended value is an RFC 8187 attr-char or a %XX escape.
    expect(disposition.split("filename*=UTF-8''")[1]).toMatch(/^(?:[A-Za-z0-9!#$&+\-.^_`|~]|%[0-9A-F]{2})+$/);
  });

  it("an HTML attachment downloads with nosniff and a sandboxing Content-Security-Policy, so it never runs as a page of Engram's origin", async () => {
    const bytes = Buffer.from("<!doctype html><title>Hi</title><script>fetch('/v1/auth/me')</script><p>Hello</p>\n");
    const created = await upload(ann, "page.html", "text/html", bytes);
    const memory = await processed(ann, created.id);
    const res = await download(ann, created.id, memory.attachments[0].id);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    expect(res.headers.get("content-disposition")).toMatch(/^attachment;/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/default-src 'none'/);
    expect(csp).toMatch(/\bsandbox\b/);
  });

  it("a HEAD of a download or of a signed view URL opens no read of the file (Next sends no body for it, and never closes one opened)", async () => {
    const png = makePng(4, 4);
    const created = await upload(ann, "dot.png", "image/png", png);
    const memory = await processed(ann, created.id);
    const { objectKey } = await h.db.attachment.findFirstOrThrow({ where: { memoryId: created.id } });
    class CountingReads extends LocalBlobStore {
      reads = 0;
      override async read(key: string, range?: { start: number; end: number }) {
        if (key === objectKey) this.reads += 1;
        return super.read(key, range);
      }
    }
    const store = new CountingReads(blobDir);
    setBlobStore(store);
    try {
      const url = `http://engram.test/v1/memories/${created.id}/attachments/${memory.attachments[0].id}/download`;
      const head = await dispatch(new Request(url, { method: "HEAD", headers: { authorization: `Bearer ${ann.key}` } }));
      expect(head.status).toBe(200);
      expect(head.headers.get("content-length")).toBe(String(png.length));
      const view = await ann.post(`/v1/memories/${created.id}/attachments/${memory.attachments[0].id}/view-url`);
      expect(view.status).toBe(200);
      const viewHead = await dispatch(new Request(view.body.data.url, { method: "HEAD" }));
      expect(viewHead.status).toBe(200);
      expect(viewHead.headers.get("content-length")).toBe(String(png.length));
      // Each left a file handle open (an S3 socket with that store) until garbage collection.
      expect(store.reads).toBe(0);
      const get = await download(ann, created.id, memory.attachments[0].id);
      expect(Buffer.from(await get.arrayBuffer()).equals(png)).toBe(true);
      expect(store.reads).toBe(1);
    } finally {
      setBlobStore(new LocalBlobStore(blobDir));
    }
  });
});

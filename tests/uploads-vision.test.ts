import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { IMAGE_READS_AT_ONCE } from "@/lib/extraction/extract-memory-text.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import type { Memory } from "@/lib/db/generated/client.ts";
import { extractMemoryText } from "@/lib/extraction/extract-memory-text.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { makePng } from "./support/make-files.ts";
import { dispatch } from "./support/router.ts";

/** With a chat model configured, an image is read by the model's vision (a local fake of the OpenAI API). */
let server: Server;
const visionRequests: unknown[] = [];
/** Image requests still to answer 503 (the provider overloaded). */
let overloaded = 0;
/** Image requests still to leave unanswered (a provider that accepted the connection and hangs). */
let hanging = 0;
const hung: { end(): void }[] = [];
/** Vision requests are answered after this long (ms), so images being read at once overlap. */
let answerAfterMs = 0;
/** Images answered by the model so far. */
let imagesAnswered = 0;
/** Image requests in flight now, and the most there were at once. */
let imagesInFlight = 0;
let mostImagesInFlight = 0;

/** The embedded store, counting each object's reads: the first is the create's type check, a second is extraction's. */
class CountingStore extends LocalBlobStore {
  readonly reads = new Map<string, number>();
  /** At each image read for extraction, how many images read before it the model had not answered yet (their bytes still held). */
  mostHeldAtARead = 0;
  private extractionReads = 0;
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const count = (this.reads.get(key) ?? 0) + 1;
    this.reads.set(key, count);
    if (count === 2) this.mostHeldAtARead = Math.max(this.mostHeldAtARead, this.extractionReads++ - imagesAnswered);
    return super.read(key, range);
  }
}
let store: CountingStore;
let h: Harness;
let ann: Client;
let blobDir: string;
const saved = { ...process.env };

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw || "{}");
    const name = body.response_format?.json_schema?.name;
    const parts = body.messages?.flatMap((m: { content: unknown }) => (Array.isArray(m.content) ? m.content : [])) ?? [];
    const image = parts.find((p: { type: string }) => p.type === "image_url");
    if (image) visionRequests.push(image);
    if (image && hanging > 0) {
      hanging--;
      hung.push(res);
      return;
    }
    if (image && overloaded > 0) {
      overloaded--;
      return res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "The engine is currently overloaded" } }));
    }
    if (image) mostImagesInFlight = Math.max(mostImagesInFlight, ++imagesInFlight);
    if (image && answerAfterMs > 0) await new Promise((resolve) => setTimeout(resolve, answerAfterMs));
    if (image) {
      imagesInFlight--;
      imagesAnswered++;
    }
    const content = image
      ? "Whiteboard: the on-call rotation swaps every Thursday at noon."
      : JSON.stringify(name === "memory_classification" ? { kind: "semantic", stability: "stable" } : { summary: "An on-call whiteboard photo." });
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id: "chatcmpl-1",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
  });
  // Port 0: a free port the system picks (a fixed one failed the run whenever something else held it).
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-test-vision", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-vision-blobs-"));
  store = new CountingStore(blobDir);
  setBlobStore(store);
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  process.env = saved;
  setBlobStore(undefined);
  await h?.close();
  await new Promise((r) => server.close(r));
  rmSync(blobDir, { recursive: true, force: true });
});

async function uploadImage(width = 20, height = 12): Promise<string> {
  const png = makePng(width, height);
  const intent = (await ann.post("/v1/uploads", { filename: "board.png", content_type: "image/png", size_bytes: png.length })).body.data;
  expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(png) }))).status).toBe(200);
  const created = await ann.post("/v1/memories", { file_ref: intent.file_ref });
  expect(created.status).toBe(201);
  return created.body.data.id;
}

describe("images with a vision model", () => {
  it("a vision model that is overloaded is asked again later; the image is not recorded as unreadable", async () => {
    // More than the model SDK's own retry of one request absorbs: the attempt fails, the next one is answered.
    overloaded = 3;
    visionRequests.length = 0;
    const id = await uploadImage();
    const memory = await waitProcessed(h.db, ann, id, 60_000);
    // Before, the overload was kept as the image's final answer: done, with only the file name as
    // content and "The file could not be read: The engine is currently overloaded".
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect(memory.content).toContain("on-call rotation swaps every Thursday");
    expect(visionRequests).toHaveLength(4);
  });

  it("a vision model that never answers is cut off at ENGRAM_MODEL_TIMEOUT_MS and asked again later", async () => {
    hanging = 1;
    visionRequests.length = 0;
    process.env.ENGRAM_MODEL_TIMEOUT_MS = "1500";
    try {
      const id = await uploadImage(24, 14);
      // Before, the request had no time limit: the memory stayed `running` (its lease renewed) for good.
      const memory = await waitProcessed(h.db, ann, id, 30_000);
      expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
      expect(memory.content).toContain("on-call rotation swaps every Thursday");
      expect(visionRequests).toHaveLength(2);
    } finally {
      delete process.env.ENGRAM_MODEL_TIMEOUT_MS;
      for (const res of hung.splice(0)) res.end();
    }
  });

  it("the model's transcription becomes the content; no processing_error", async () => {
    visionRequests.length = 0;
    const png = makePng(16, 9);
    const intent = (await ann.post("/v1/uploads", { filename: "board.png", content_type: "image/png", size_bytes: png.length })).body.data;
    expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(png) }))).status).toBe(200);
    const created = await ann.post("/v1/memories", { file_ref: intent.file_ref });
    expect(created.status).toBe(201);
    let memory;
    for (let i = 0; i < 600; i++) {
      memory = (await ann.get(`/v1/memories/${created.body.data.id}`)).body.data;
      if (["done", "failed"].includes(memory.processing_status)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect(memory.content).toContain("on-call rotation swaps every Thursday");
    expect(visionRequests).toHaveLength(1);
    expect(JSON.stringify(visionRequests[0])).toContain("data:image/png;base64,");
  });

  it("images are fetched from storage as the model takes them (IMAGE_READS_AT_ONCE at a time): jobs waiting for it hold no image's bytes", async () => {
    // The runner works on 16 memories at once: each image job fetched its whole file (up to
    // ENGRAM_EXTRACT_MAX_BYTES) at once and held it while the model read the others.
    answerAfterMs = 400;
    try {
      const ids = await Promise.all([30, 31, 32, 33].map((width) => uploadImage(width, 10)));
      for (const id of ids) {
        expect(await waitProcessed(h.db, ann, id, 60_000)).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
      }
      // At each image's fetch, at most the images still in their turn are waiting for the model's answer.
      expect(store.mostHeldAtARead).toBeLessThanOrEqual(IMAGE_READS_AT_ONCE - 1);
    } finally {
      answerAfterMs = 0;
    }
  });

  it("a text memory pushed after many images is processed at once, the images read a few at a time", async () => {
    // Images went to the model one at a time, each waiting image job holding one of the runner's
    // workers (16): 40 photos took them all, and text pushed after them waited for their model calls.
    answerAfterMs = 1500;
    mostImagesInFlight = 0;
    try {
      const images: string[] = [];
      for (let batch = 0; batch < 4; batch++) images.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => uploadImage(40 + batch * 10 + i, 10)))));
      const pushedAt = Date.now();
      const text = (await ann.post("/v1/memories", { content: "The loading dock closes at six on Fridays." })).body.data.id;
      expect(await waitProcessed(h.db, ann, text, 120_000)).toMatchObject({ processing_status: "done" });
      expect(Date.now() - pushedAt).toBeLessThan(10_000);
      for (const id of images) {
        expect(await waitProcessed(h.db, ann, id, 120_000)).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
      }
      // Three at a time, not one: 40 images in 20 s, not 60.
      expect(mostImagesInFlight).toBe(IMAGE_READS_AT_ONCE);
    } finally {
      answerAfterMs = 0;
    }
  }, 180_000);

  it("a job whose lease is lost stops its model call: the next image does not wait for the model's timeout", async () => {
    // The image turn waited for the model call of a job already given up, until ENGRAM_MODEL_TIMEOUT_MS.
    process.env.ENGRAM_MODEL_TIMEOUT_MS = "60000";
    hanging = 1;
    const image = async (name: string) => {
      const key = `uploads/${ann.id}/${name}`;
      const png = makePng(12, 8);
      await store.write(key, png, "image/png");
      return { fileRef: { object_key: key, filename: `${name}.png`, content_type: "image/png", size_bytes: png.length }, content: "", contentType: "file", hint: null } as unknown as Memory;
    };
    try {
      const lease = new AbortController();
      const lost = extractMemoryText(await image("lost-lease"), { signal: lease.signal });
      for (let i = 0; i < 200 && hung.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
      expect(hung).toHaveLength(1);
      const closed = new Promise<void>((resolve) => (hung[0] as unknown as import("node:http").ServerResponse).once("close", () => resolve()));
      lease.abort(new Error("the lease was lost"));
      await expect(lost).rejects.toThrow("the lease was lost");
      const next = await Promise.race([
        extractMemoryText(await image("next")),
        new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error("the next image is still waiting for the given-up model call")), 10_000)),
      ]);
      expect(next.content).toContain("on-call rotation swaps every Thursday");
      // The provider's request was ended too, not left open: with three image turns the next image no longer
      // waits for it, so this is what fails when the lost lease does not reach the model call.
      await Promise.race([closed, new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error("the given-up model request is still open")), 5_000))]);
    } finally {
      hanging = 0;
      delete process.env.ENGRAM_MODEL_TIMEOUT_MS;
      for (const res of hung.splice(0)) res.end();
    }
  }, 30_000);
});

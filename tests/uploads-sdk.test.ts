import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { makePdf, makePng } from "./support/make-files.ts";
import { dispatch } from "./support/router.ts";

/** Memax's own SDK (its TypeScript source beside the repository) drives the file flow; its fetch goes to the route handlers. */
const SDK_CANDIDATES = [
  process.env.MEMAX_SDK,
  path.resolve("../shared/clients/memax/packages/sdk/src/index.ts"),
  "/work/shared/clients/memax/packages/sdk/src/index.ts",
  "/tmp/memax-client/packages/sdk/dist/index.js",
].filter((p): p is string => !!p);
const SDK = SDK_CANDIDATES.find((p) => existsSync(p));

interface MemaxLike {
  uploads: { create(input: { filename: string; content_type: string; size_bytes: number; purpose: "memory_attachment" }): Promise<any> };
  memories: {
    push(content: string, options?: Record<string, unknown>): Promise<any>;
    get(id: string): Promise<any>;
    downloadAttachment(memoryId: string, attachmentId: string): Promise<Response>;
    attachmentViewURL(memoryId: string, attachmentId: string): Promise<{ url: string; expires_at: number }>;
  };
}

let h: Harness;
let ann: Client;
let memax: MemaxLike;
let blobDir: string;

beforeAll(async () => {
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-sdk-blobs-"));
  setBlobStore(new LocalBlobStore(blobDir));
  h = await createHarness();
  ann = await h.user("Ann");
  if (!SDK) throw new Error(`Memax's SDK was not found (looked in ${SDK_CANDIDATES.join(", ")}); set MEMAX_SDK`);
  const { Memax } = (await import(/* @vite-ignore */ SDK)) as { Memax: new (config: Record<string, unknown>) => MemaxLike };
  memax = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: (input: RequestInfo | URL, init?: RequestInit) => dispatch(new Request(input, init)), maxRetries: 0 });
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
});

async function processed(id: string) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const memory = await memax.memories.get(id);
    if (["done", "failed"].includes(memory.processing_status)) return memory;
    if (Date.now() > deadline) throw new Error(`memory ${id} still ${memory.processing_status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("Memax SDK: uploads, push with fileRef, attachments", () => {
  it("uploads a PDF, pushes it, downloads the original and gets a view URL for an image", async () => {
    const pdf = await makePdf([["Shipping policy"], ["Parcels over twenty kilograms travel by freight, never by courier."]]);
    const intent = await memax.uploads.create({ filename: "shipping.pdf", content_type: "application/pdf", size_bytes: pdf.length, purpose: "memory_attachment" });
    expect(intent).toMatchObject({ filename: "shipping.pdf", purpose: "memory_attachment", expires_in: 900, max_bytes: 25 * 1024 * 1024 });
    const put = await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(pdf) }));
    expect(put.status).toBe(200);
    const sha256 = createHash("sha256").update(pdf).digest("hex");
    const pushed = await memax.memories.push("", {
      fileRef: { object_key: intent.object_key, filename: intent.filename, content_type: intent.content_type, sha256 },
      contentType: "file",
    });
    expect(pushed).toMatchObject({ title: "shipping.pdf", state: "processing" });
    const memory = await processed(pushed.id);
    expect(memory.content).toContain("twenty kilograms travel by freight");
    const download = await memax.memories.downloadAttachment(memory.id, memory.attachments[0].id);
    expect(Buffer.from(await download.arrayBuffer()).equals(pdf)).toBe(true);

    const png = makePng(3, 2);
    const image = await memax.uploads.create({ filename: "dot.png", content_type: "image/png", size_bytes: png.length, purpose: "memory_attachment" });
    expect((await dispatch(new Request(image.upload_url, { method: "PUT", headers: image.headers, body: new Uint8Array(png) }))).status).toBe(200);
    const pic = await processed((await memax.memories.push("", { fileRef: { object_key: image.object_key, filename: "dot.png", content_type: "image/png", size_bytes: png.length } })).id);
    const view = await memax.memories.attachmentViewURL(pic.id, pic.attachments[0].id);
    expect(view.expires_at).toBeGreaterThan(Date.now() / 1000);
    expect((await dispatch(new Request(view.url))).status).toBe(200);
  });
});

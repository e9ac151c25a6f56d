import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blobStore, setBlobStore } from "@/lib/blobs/blob-store.ts";
import { S3BlobStore } from "@/lib/blobs/s3-blob-store.ts";
import { checkAgentSessionsInStore } from "./support/agent-session-store-check.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { sweepUploads } from "@/lib/uploads/sweep-uploads.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { makePdf, makePng } from "./support/make-files.ts";
import { startS3PresignGate } from "./support/s3-presign-gate.ts";
import { readPausing } from "./support/read-pausing.ts";

/**
 * The S3-compatible adapter against s3rver, a local fake of the S3 API that
 * checks SigV4 signatures. The client PUTs straight to the "bucket" with the
 * presigned URL; Engram then verifies, extracts and serves the file.
 */
// An ephemeral port, known once s3rver listens: a fixed one collided with whatever else held it.
let PORT = 0;
const ENV = {
  ENGRAM_S3_BUCKET: "engram-test",
  ENGRAM_S3_ENDPOINT: "",
  ENGRAM_S3_REGION: "us-east-1",
  ENGRAM_S3_ACCESS_KEY_ID: "S3RVER",
  ENGRAM_S3_SECRET_ACCESS_KEY: "S3RVER",
  ENGRAM_S3_FORCE_PATH_STYLE: "true",
};
let server: S3rver;
let dir: string;
let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "engram-s3rver-"));
  server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: dir, configureBuckets: [{ name: "engram-test", configs: [] }] });
  PORT = ((await server.run()) as import("node:net").AddressInfo).port;
  ENV.ENGRAM_S3_ENDPOINT = `http://127.0.0.1:${PORT}`;
  Object.assign(process.env, ENV);
  setBlobStore(undefined);
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  for (const key of Object.keys(ENV)) delete process.env[key];
  setBlobStore(undefined);
  await h?.close();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

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

async function intent(client: Client, filename: string, contentType: string, size: number) {
  const res = await client.post("/v1/uploads", { filename, content_type: contentType, size_bytes: size, purpose: "memory_attachment" });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data;
}

describe("S3-compatible storage (s3rver)", () => {
  it("agent session files are written to the bucket server-side; a replaced version's object is deleted", async () => {
    await checkAgentSessionsInStore(h, ann, "s3-1");
  });

  it("is chosen by ENGRAM_S3_BUCKET", async () => {
    expect((await blobStore()).kind).toBe("s3");
  });

  it("presigned PUT → create → extracted PDF → download of the same bytes → delete removes the object", async () => {
    const pdf = await makePdf([["Cover page"], ["The quorum of the review board is four members since March."]]);
    const i = await intent(ann, "board.pdf", "application/pdf", pdf.length);
    expect(i.upload_url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${PORT}/engram-test/uploads/`));
    const sent = await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(pdf) });
    expect(sent.status, await sent.text()).toBe(200);

    const created = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: sha256(pdf) } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const memory = await processed(ann, created.body.data.id);
    expect(memory).toMatchObject({ state: "active", processing_status: "done", processing_error: null });
    expect(memory.content).toContain("quorum of the review board");

    const recall = await ann.post("/v1/recall", { query: "how many members make a quorum of the review board" });
    expect(recall.body.data.memories.map((m: { id: string }) => m.id)).toContain(memory.id);

    const download = await ann.get(`/v1/memories/${memory.id}/attachments/${memory.attachments[0].id}/download`);
    expect(download.status).toBe(200);
    const bytes = await fetchBytes(`/v1/memories/${memory.id}/attachments/${memory.attachments[0].id}/download`, ann.key);
    expect(bytes.equals(pdf)).toBe(true);

    expect(await (await blobStore()).head(i.object_key)).toMatchObject({ size: pdf.length });
    expect((await ann.delete(`/v1/memories/${memory.id}`)).status).toBe(200);
    expect(await (await blobStore()).head(i.object_key)).toBeNull();
  });

  it("the presigned URL signs size and type; a wrong-size object never becomes a memory", async () => {
    const text = Buffer.from("twelve bytes");
    const i = await intent(ann, "t.txt", "text/plain", text.length);
    // Real S3, R2 and MinIO refuse a PUT whose Content-Length or Content-Type differ from these
    // signed headers; s3rver does not check SigV4, so Engram's own check at create is tested here.
    expect(new URL(i.upload_url).searchParams.get("X-Amz-SignedHeaders")?.split(";")).toEqual(expect.arrayContaining(["content-length", "content-type", "host"]));
    expect(Number(new URL(i.upload_url).searchParams.get("X-Amz-Expires"))).toBe(900);
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(Buffer.from("thirteen byte")) })).status).toBe(200);
    const wrongSize = await ann.post("/v1/memories", { file_ref: i.file_ref });
    expect(wrongSize.status).toBe(400);
    expect(wrongSize.body.error.details).toMatchObject({ size_bytes: 13, expected_size_bytes: 12 });

    const png = makePng(4, 4);
    const p = await intent(ann, "real.pdf", "application/pdf", png.length);
    expect((await fetch(p.upload_url, { method: "PUT", headers: p.headers, body: new Uint8Array(png) })).status).toBe(200);
    const sniffed = await ann.post("/v1/memories", { file_ref: p.file_ref });
    expect(sniffed.status).toBe(415);
    expect(sniffed.body.error.details).toMatchObject({ detected: "image/png" });
    expect((await bob.post("/v1/memories", { file_ref: p.file_ref })).status).toBe(400);
  });

  it("bytes a still-valid upload URL writes after the file was deleted are swept, not left in the bucket for good", async () => {
    const bytes = Buffer.from("quarterly numbers\n");
    const i = await intent(ann, "q.txt", "text/plain", bytes.length);
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    const created = await ann.post("/v1/memories", { file_ref: i.file_ref });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await processed(ann, created.body.data.id);
    expect((await ann.delete(`/v1/memories/${created.body.data.id}`)).status).toBe(200);
    const store = await blobStore();
    expect(await store.head(i.object_key)).toBeNull();
    // The bucket only checks that no object is there: within its 15 minutes the URL writes again.
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    expect(await store.head(i.object_key)).not.toBeNull();
    await sweepUploads(h.db, new Date(Date.now() + 16 * 60_000));
    expect(await store.head(i.object_key)).toBeNull();
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(0);
  });

  it("bytes a still-valid upload URL writes after the account was emptied are swept, not left in the bucket for good", async () => {
    const cy = await h.user("Cy");
    const bytes = Buffer.from("draft after the wipe\n");
    const i = await intent(cy, "late.txt", "text/plain", bytes.length);
    const emptied = await cy.delete("/v1/account/data");
    expect(emptied.status, JSON.stringify(emptied.body)).toBe(200);
    // The bucket only checks that no object is there: within its 15 minutes the URL still writes.
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    const store = await blobStore();
    expect(await store.head(i.object_key)).not.toBeNull();
    // The emptied account's upload is not attachable any more.
    const push = await cy.post("/v1/memories", { file_ref: i.file_ref });
    expect([400, 409], JSON.stringify(push.body)).toContain(push.status);
    // Still within the URL's 15 minutes the record stays, for the sweep to find what it writes.
    await sweepUploads(h.db, new Date(Date.now() + 60_000));
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(1);
    await sweepUploads(h.db, new Date(Date.now() + 16 * 60_000));
    expect(await store.head(i.object_key)).toBeNull();
    expect(await h.db.upload.count({ where: { objectKey: i.object_key } })).toBe(0);
  });

  it("a view URL for an image is a presigned GET that renders inline", async () => {
    const png = makePng(8, 6);
    const i = await intent(ann, "pic.png", "image/png", png.length);
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(png) })).status).toBe(200);
    const created = await ann.post("/v1/memories", { file_ref: i.file_ref });
    const memory = await processed(ann, created.body.data.id);
    expect(memory.attachments[0]).toMatchObject({ width: 8, height: 6 });
    const view = await ann.post(`/v1/memories/${memory.id}/attachments/${memory.attachments[0].id}/view-url`);
    expect(view.status).toBe(200);
    const shown = await fetch(view.body.data.url);
    expect(shown.status).toBe(200);
    expect(Buffer.from(await shown.arrayBuffer()).equals(png)).toBe(true);
  });
});

describe("S3 storage that stops answering", () => {
  it("a bucket that accepts the connection and never answers: the push fails with 503 after ENGRAM_BLOB_TIMEOUT_MS, not held for good", async () => {
    const bytes = Buffer.from("the night shift rota\n");
    const i = await intent(ann, "rota.txt", "text/plain", bytes.length);
    expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    const { createServer } = await import("node:net");
    const sockets: import("node:net").Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    process.env.ENGRAM_S3_ENDPOINT = `http://127.0.0.1:${(silent.address() as import("node:net").AddressInfo).port}`;
    process.env.ENGRAM_BLOB_TIMEOUT_MS = "300";
    setBlobStore(undefined);
    try {
      const started = performance.now();
      // Without a deadline the create waited on the bucket's socket for as long as it stayed open.
      const created = await Promise.race([
        ann.post("/v1/memories", { file_ref: i.file_ref }),
        new Promise<never>((_resolve, reject) => setTimeout(() => reject(new Error("the push is still waiting on the bucket")), 15_000)),
      ]);
      expect(performance.now() - started).toBeLessThan(15_000);
      expect(created.status, JSON.stringify(created.body)).toBe(503);
      expect(created.body.error.code).toBe("unavailable");
      expect(JSON.stringify(created.body)).not.toContain(process.env.ENGRAM_S3_ENDPOINT);
    } finally {
      process.env.ENGRAM_S3_ENDPOINT = ENV.ENGRAM_S3_ENDPOINT;
      delete process.env.ENGRAM_BLOB_TIMEOUT_MS;
      setBlobStore(undefined);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
    // The bucket back: the same upload attaches.
    const attached = await ann.post("/v1/memories", { file_ref: i.file_ref });
    expect(attached.status).toBe(201);
    expect((await processed(ann, attached.body.data.id)).processing_status).toBe("done");
  }, 30_000);
});

describe("S3 presigned uploads, signatures checked as a real bucket checks them", () => {
  it("a signed upload URL cannot replace the object once it was written (and attached, and extracted)", async () => {
    const gate = await startS3PresignGate(PORT, { accessKeyId: ENV.ENGRAM_S3_ACCESS_KEY_ID, secretAccessKey: ENV.ENGRAM_S3_SECRET_ACCESS_KEY });
    setBlobStore(
      new S3BlobStore({
        bucket: ENV.ENGRAM_S3_BUCKET,
        endpoint: `http://127.0.0.1:${gate.port}`,
        region: ENV.ENGRAM_S3_REGION,
        accessKeyId: ENV.ENGRAM_S3_ACCESS_KEY_ID,
        secretAccessKey: ENV.ENGRAM_S3_SECRET_ACCESS_KEY,
        forcePathStyle: true,
      }),
    );
    try {
      const honest = Buffer.from("The vault code is rotated every Friday by the facilities team.");
      const forged = Buffer.from("The vault code is posted on the lobby wall.".padEnd(honest.length, " "));
      expect(forged.length).toBe(honest.length);
      const i = await intent(ann, "vault.txt", "text/plain", honest.length);
      // The gate checks signatures: a header sent otherwise than signed is refused.
      expect((await fetch(i.upload_url, { method: "PUT", headers: { ...i.headers, "Content-Type": "text/html" }, body: new Uint8Array(honest) })).status).toBe(403);
      const sent = await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(honest) });
      expect(sent.status, await sent.text()).toBe(200);
      const created = await ann.post("/v1/memories", { content: "", file_ref: { ...i.file_ref, sha256: sha256(honest) } });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const memory = await processed(ann, created.body.data.id);
      expect(memory.content).toContain("rotated every Friday");

      // The same URL again, within its 15 minutes: as given, and without the condition.
      expect((await fetch(i.upload_url, { method: "PUT", headers: i.headers, body: new Uint8Array(forged) })).status).not.toBe(200);
      expect((await fetch(i.upload_url, { method: "PUT", headers: { "Content-Type": "text/plain" }, body: new Uint8Array(forged) })).status).not.toBe(200);
      const bytes = await fetchBytes(`/v1/memories/${memory.id}/attachments/${memory.attachments[0].id}/download`, ann.key);
      expect(bytes.toString()).toBe(honest.toString());
    } finally {
      setBlobStore(undefined);
      await gate.close();
    }
  });
});

async function fetchBytes(pathname: string, key: string): Promise<Buffer> {
  const { dispatch } = await import("./support/router.ts");
  const res = await dispatch(new Request(`http://engram.test${pathname}`, { headers: { authorization: `Bearer ${key}` } }));
  return Buffer.from(await res.arrayBuffer());
}

describe("S3 reads whose reader pauses", () => {
  it("a download whose client stops reading for longer than ENGRAM_BLOB_TIMEOUT_MS still completes: the timeout bounds the bucket, not the reader", async () => {
    const store = new S3BlobStore({
      bucket: ENV.ENGRAM_S3_BUCKET,
      endpoint: ENV.ENGRAM_S3_ENDPOINT,
      region: ENV.ENGRAM_S3_REGION,
      accessKeyId: ENV.ENGRAM_S3_ACCESS_KEY_ID,
      secretAccessKey: ENV.ENGRAM_S3_SECRET_ACCESS_KEY,
      forcePathStyle: true,
      timeoutMs: 300,
    });
    // Larger than every buffer between the bucket and the reader, so the socket itself goes quiet.
    const bytes = Buffer.alloc(24 * 1024 * 1024, "the quarterly archive\n");
    await store.write("tests/paused-reader.bin", bytes, "application/octet-stream");
    // The HTTP client of a download stops reading (a slow link, a full window) for a while.
    expect(sha256(await readPausing(await store.read("tests/paused-reader.bin"), 900))).toBe(sha256(bytes));
    // But a paused read holds one of the client's sockets: a reader gone quiet for over 4 × the timeout
    // is ended, so readers that stop (abandoned, or on purpose) cannot take every socket of the pool.
    const abandoned = await store.read("tests/paused-reader.bin");
    const reading = (async () => {
      for await (const part of abandoned) {
        void part;
        await new Promise((resolve) => setTimeout(resolve, 3_000));
      }
    })();
    await expect(reading).rejects.toThrow(/paused for over 1200 ms/);
    await store.delete("tests/paused-reader.bin");
  }, 30_000);

  it("a bucket whose body stalls while the reader waits still fails the read after ENGRAM_BLOB_TIMEOUT_MS", async () => {
    const { createServer } = await import("node:net");
    const sockets: import("node:net").Socket[] = [];
    // Answers the GET's head and ten of its thousand bytes, then says nothing more.
    const stalling = createServer((socket) => {
      sockets.push(socket);
      socket.once("data", () => socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000\r\n\r\n0123456789"));
    });
    await new Promise<void>((resolve) => stalling.listen(0, "127.0.0.1", resolve));
    const store = new S3BlobStore({
      bucket: ENV.ENGRAM_S3_BUCKET,
      endpoint: `http://127.0.0.1:${(stalling.address() as import("node:net").AddressInfo).port}`,
      region: ENV.ENGRAM_S3_REGION,
      accessKeyId: ENV.ENGRAM_S3_ACCESS_KEY_ID,
      secretAccessKey: ENV.ENGRAM_S3_SECRET_ACCESS_KEY,
      forcePathStyle: true,
      timeoutMs: 300,
    });
    try {
      const started = performance.now();
      const read = (async () => {
        for await (const part of await store.read("tests/stalled.bin")) void part;
      })();
      await expect(Promise.race([read, new Promise((resolve) => setTimeout(() => resolve("still reading after 5 s"), 5_000))])).rejects.toThrow(/did not answer/);
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => stalling.close(resolve));
    }
  });
});

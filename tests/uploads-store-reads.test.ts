import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore, type BlobInfo } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

/**
 * A store that answers every ranged read with the whole object (an S3-compatible server or a proxy
 * that drops the Range header), counting the bytes its readers pulled out of it.
 */
class RangeIgnoringStore extends LocalBlobStore {
  pulled = 0;
  /** Like S3 and Vercel Blob, which record no sha256 of what a client PUT. */
  recordsSha256 = true;
  wholeReads = 0;
  /** Objects deleted right after their head() answers, as a concurrent delete (an account emptied) lands. */
  readonly deleteAfterHead = new Set<string>();
  override async head(key: string): Promise<BlobInfo | null> {
    const info = await super.head(key);
    if (this.deleteAfterHead.delete(key)) await this.delete(key);
    return info && !this.recordsSha256 ? { size: info.size, contentType: info.contentType } : info;
  }
  override async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    if (!range) this.wholeReads++;
    const whole = await super.read(key);
    const count = (chunk: Buffer) => (this.pulled += chunk.length);
    // Lazy: a chunk is read from the file only when the reader asks for it (16 KiB buffered ahead at most).
    async function* pull() {
      for await (const chunk of whole) {
        count(chunk as Buffer);
        yield chunk as Buffer;
      }
    }
    return Readable.from(pull(), { objectMode: false, highWaterMark: 16 * 1024 });
  }
}

let h: Harness;
let ann: Client;
let blobDir: string;
let store: RangeIgnoringStore;

beforeAll(async () => {
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-range-ignored-"));
  store = new RangeIgnoringStore(blobDir);
  setBlobStore(store);
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  setBlobStore(undefined);
  await h?.close();
  rmSync(blobDir, { recursive: true, force: true });
});

describe("a store that ignores the byte range asked for", () => {
  it("the create's type check reads at most its 64 KiB (and a chunk past them), not the whole object", async () => {
    const line = "Shift handover: check the freezer log, then sign the sheet by the door.\n";
    const bytes = Buffer.from(line.repeat(Math.ceil((8 * 1024 * 1024) / line.length)));
    const intent = (await ann.post("/v1/uploads", { filename: "handover.txt", content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" })).body.data;
    expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes), duplex: "half" } as RequestInit))).status).toBe(200);
    store.pulled = 0;
    const created = await ann.post("/v1/memories", { content: "", file_ref: intent.file_ref });
    expect(created.status, created.text).toBe(201);
    // Before, the whole 8 MiB object was streamed into memory for a 64 KiB check.
    expect(store.pulled).toBeLessThanOrEqual(256 * 1024);
  });

});

describe("a store that records no sha256 (S3, Vercel Blob)", () => {
  it("the create hashes the object once, not again on every create that names it", async () => {
    // Before, each create hashed the whole object again (up to 2 GiB read through the server), also when
    // it then failed (a wrong sha256, a type mismatch): repeating it repeated the whole read.
    const line = "Visitor policy: badges at the front desk, escorts past the second door.\n";
    const bytes = Buffer.from(line.repeat(Math.ceil((1024 * 1024) / line.length)));
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    store.recordsSha256 = false;
    try {
      const intent = (await ann.post("/v1/uploads", { filename: "visitors.txt", content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" })).body.data;
      expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes), duplex: "half" } as RequestInit))).status).toBe(200);
      store.wholeReads = 0;
      for (let i = 0; i < 3; i++) {
        const wrong = await ann.post("/v1/memories", { content: "", file_ref: { ...intent.file_ref, sha256: "0".repeat(64) } });
        expect(wrong.status).toBe(400);
        expect(wrong.body.error.details.sha256).toBe(sha256);
      }
      const created = await ann.post("/v1/memories", { content: "", file_ref: { ...intent.file_ref, sha256 } });
      expect(created.status, created.text).toBe(201);
      expect((await ann.get(`/v1/memories/${created.body.data.id}`)).body.data.attachments[0].sha256).toBe(sha256);
      expect(store.wholeReads).toBe(1);
    } finally {
      store.recordsSha256 = true;
    }
  });

  it("a file that is not its declared type is refused on its first 64 KiB, before the whole object is read to hash it", async () => {
    const bytes = Buffer.concat([Buffer.from("%PDF-1.7\n"), Buffer.alloc(1024 * 1024, "stream of a report\n")]);
    store.recordsSha256 = false;
    try {
      const intent = (await ann.post("/v1/uploads", { filename: "notes.txt", content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" })).body.data;
      expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes), duplex: "half" } as RequestInit))).status).toBe(200);
      store.wholeReads = 0;
      const refused = await ann.post("/v1/memories", { content: "", file_ref: intent.file_ref });
      expect(refused.status).toBe(415);
      expect(refused.body.error.details.detected).toBe("application/pdf");
      expect(store.wholeReads).toBe(0);
    } finally {
      store.recordsSha256 = true;
    }
  });

  it("an object deleted between the create's head and its reads is a 400 naming the upload, not a 500", async () => {
    const bytes = Buffer.from("Parking: level 2 is reserved for visitors on Mondays.\n");
    for (const recordsSha256 of [true, false]) {
      store.recordsSha256 = recordsSha256;
      try {
        const intent = (await ann.post("/v1/uploads", { filename: "parking.txt", content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" })).body.data;
        expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes), duplex: "half" } as RequestInit))).status).toBe(200);
        store.deleteAfterHead.add(intent.object_key);
        const res = await ann.post("/v1/memories", { content: "", file_ref: intent.file_ref });
        expect(res.status, res.text).toBe(400);
        expect(res.body.error.details).toMatchObject({ object_key: intent.object_key });
      } finally {
        store.recordsSha256 = true;
      }
    }
  });

  it("a JPEG whose frame header comes after more than 64 KiB of metadata (EXIF, ICC) still keeps its width and height", async () => {
    const segment = (marker: number, body: Buffer) => Buffer.concat([Buffer.from([0xff, marker]), Buffer.from([(body.length + 2) >> 8, (body.length + 2) & 0xff]), body]);
    const frame = Buffer.from([8, 0x03, 0x00, 0x05, 0x00, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]); // 768 high, 1280 wide
    frame.writeUInt16BE(768, 1);
    frame.writeUInt16BE(1280, 3);
    const jpeg = Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      segment(0xe1, Buffer.concat([Buffer.from("Exif\0\0"), Buffer.alloc(65_000, 1)])),
      segment(0xe2, Buffer.concat([Buffer.from("ICC_PROFILE\0"), Buffer.alloc(20_000, 2)])),
      segment(0xc0, frame),
      Buffer.from([0xff, 0xd9]),
    ]);
    const intent = (await ann.post("/v1/uploads", { filename: "site-visit.jpg", content_type: "image/jpeg", size_bytes: jpeg.length, purpose: "memory_attachment" })).body.data;
    expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(jpeg), duplex: "half" } as RequestInit))).status).toBe(200);
    const created = await ann.post("/v1/memories", { content: "", file_ref: intent.file_ref });
    expect(created.status, created.text).toBe(201);
    expect((await ann.get(`/v1/memories/${created.body.data.id}`)).body.data.attachments[0]).toMatchObject({ width: 1280, height: 768 });
  });
});

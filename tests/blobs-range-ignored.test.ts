import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

/**
 * A store that answers every ranged read with the whole object (an S3-compatible server or a proxy
 * that drops the Range header), counting the bytes its readers pulled out of it.
 */
class RangeIgnoringStore extends LocalBlobStore {
  pulled = 0;
  override async read(key: string): Promise<Readable> {
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

import path from "node:path";
import { ApiError } from "@/lib/api/errors.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import { Readable } from "node:stream";

export interface BlobInfo {
  size: number;
  contentType: string | undefined;
  /** Known without reading the object (the embedded store records it while receiving). */
  sha256?: string;
}

export interface SignedUpload {
  url: string;
  method: "PUT";
  /** Headers the client must send with the PUT. */
  headers: Record<string, string>;
}

export interface SignUploadOptions {
  contentType: string;
  sizeBytes: number;
  expiresIn: number;
  /** Origin Engram is reached at (signed URLs the embedded store serves itself). */
  baseUrl: string;
}

export interface SignDownloadOptions {
  filename: string;
  contentType: string;
  inline: boolean;
  expiresIn: number;
  baseUrl: string;
}

/**
 * Where the bytes of uploaded files live. The embedded default keeps them on
 * local disk and serves its own HMAC-signed URLs; S3-compatible storage
 * (AWS, R2, MinIO) and Vercel Blob are the production adapters. Keys are made by Engram only.
 */
export interface BlobStore {
  readonly kind: "local" | "s3" | "vercel";
  signUpload(key: string, options: SignUploadOptions): Promise<SignedUpload>;
  signDownload(key: string, options: SignDownloadOptions): Promise<string>;
  head(key: string): Promise<BlobInfo | null>;
  /** The object's bytes as a stream; `range` is inclusive, like HTTP. Throws BlobMissing when missing. */
  read(key: string, range?: { start: number; end: number }): Promise<Readable>;
  /** Missing objects are fine (idempotent). */
  delete(key: string): Promise<void>;
  /** A server-side write of a small object Engram made itself (agent session files); replaces any object at `key`. */
  write(key: string, bytes: Buffer, contentType: string): Promise<void>;
}

/**
 * `read` of an object that is not there: it can go between a caller's `head` and its `read` (a
 * concurrent delete), which callers answer as not found, not as the server's failure.
 */
export class BlobMissing extends Error {
  constructor(readonly key: string) {
    super(`object ${key} is missing`);
    this.name = "BlobMissing";
  }
}

/**
 * ENGRAM_BLOB_TIMEOUT_MS (default 30 s): how long a call to S3 or Vercel Blob may wait for the
 * storage to connect or to send the next bytes its reader waits for (a paused reader is not counted). A store that accepts the connection and never
 * answers otherwise held the request (a push's file check, a download) or the job for good.
 */
export function blobTimeoutMs(): number {
  return positiveIntEnv("ENGRAM_BLOB_TIMEOUT_MS", 30_000);
}

/** How long a download's reader may stop reading before the storage read is ended: 4 × the timeout (2 minutes by default). */
export function readerPauseMs(timeoutMs: number): number {
  return 4 * timeoutMs;
}

/**
 * The body of a storage read, failed with `stalled()` when the storage sends nothing for `ms` while
 * the reader waits for more. Timed only while the reader asks: a download's client that stops reading
 * holds the source back (backpressure), and an idle timer counting that pause cut the download.
 */
export function failWhenStalled(source: Readable, ms: number, stalled: () => Error): Readable {
  let timer: NodeJS.Timeout | undefined;
  let paused: NodeJS.Timeout | undefined;
  const disarm = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const arm = () => {
    disarm();
    timer = setTimeout(() => out.destroy(stalled()), ms);
  };
  const out: Readable = new Readable({
    read() {
      clearTimeout(paused);
      arm();
      source.resume();
    },
    destroy(error, callback) {
      disarm();
      clearTimeout(paused);
      source.destroy();
      callback(error);
    },
  });
  // Flowing only while the reader asks (read() resumes it).
  source.pause();
  source.on("data", (chunk: Buffer) => {
    if (out.push(chunk)) return arm();
    // The reader has enough for now: nothing is awaited from the storage until it asks again. But a
    // paused read holds one of the store client's sockets: a reader gone quiet for readerPauseMs
    // (abandoned, or holding sockets on purpose) is ended, so pausers cannot take every socket.
    disarm();
    source.pause();
    clearTimeout(paused);
    paused = setTimeout(() => out.destroy(new Error(`the reader paused for over ${readerPauseMs(ms)} ms`)), readerPauseMs(ms));
  });
  source.once("end", () => {
    disarm();
    clearTimeout(paused);
    out.push(null);
  });
  source.once("error", (error) => out.destroy(error));
  source.once("close", () => {
    if (!source.readableEnded) out.destroy(new Error("the storage closed the read before its end"));
  });
  return out;
}

/**
 * The storage did not answer (in time, or at all): the client may retry, so 503. The store's own
 * error names its host and the request; it goes to the log, never to the caller.
 */
export function storageUnavailable(store: string, error: unknown): ApiError {
  console.error(`[engram] blob store (${store}) did not answer:`, error instanceof Error ? error.message : error);
  return new ApiError("unavailable", "The file storage did not answer; try again shortly", undefined, { "Retry-After": "5" });
}

/** Object keys are generated by Engram; anything else is refused before touching storage. */
export function assertValidKey(key: string): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9/_.-]{0,300}$/.test(key) || key.split("/").some((part) => part === "" || part === "." || part === "..")) {
    throw new Error(`invalid object key: ${key}`);
  }
}

export function defaultBlobDir(): string {
  return path.resolve(process.env.ENGRAM_BLOB_DIR ?? path.join(process.env.ENGRAM_DATA_DIR ?? path.join(process.cwd(), ".data"), "blobs"));
}

const globalForBlobs = globalThis as unknown as { __engramBlobStore?: BlobStore };

/** The configured store: S3-compatible when ENGRAM_S3_BUCKET is set, Vercel Blob when BLOB_READ_WRITE_TOKEN is, else local disk. */
export async function blobStore(): Promise<BlobStore> {
  if (globalForBlobs.__engramBlobStore) return globalForBlobs.__engramBlobStore;
  const bucket = process.env.ENGRAM_S3_BUCKET;
  const vercelToken = process.env.BLOB_READ_WRITE_TOKEN;
  const store: BlobStore = bucket
    ? new (await import("./s3-blob-store.ts")).S3BlobStore({
        bucket,
        endpoint: process.env.ENGRAM_S3_ENDPOINT || undefined,
        region: process.env.ENGRAM_S3_REGION || "auto",
        accessKeyId: process.env.ENGRAM_S3_ACCESS_KEY_ID || undefined,
        secretAccessKey: process.env.ENGRAM_S3_SECRET_ACCESS_KEY || undefined,
        forcePathStyle: process.env.ENGRAM_S3_FORCE_PATH_STYLE === "true" || process.env.ENGRAM_S3_FORCE_PATH_STYLE === "1",
      })
    : vercelToken
      ? new (await import("./vercel-blob-store.ts")).VercelBlobStore({ token: vercelToken, access: process.env.ENGRAM_VERCEL_BLOB_ACCESS === "public" ? "public" : "private" })
      : new (await import("./local-blob-store.ts")).LocalBlobStore(defaultBlobDir());
  globalForBlobs.__engramBlobStore ??= store;
  return globalForBlobs.__engramBlobStore;
}

/** Tests install a store of their own (or undefined to go back to the environment's). */
export function setBlobStore(store: BlobStore | undefined): void {
  globalForBlobs.__engramBlobStore = store;
}

/** `read` for a response: an object deleted since the caller's `head` is not_found, never a 500. */
export async function readOrNotFound(store: BlobStore, key: string, message: string): Promise<Readable> {
  try {
    return await store.read(key);
  } catch (error) {
    if (error instanceof BlobMissing) throw new ApiError("not_found", message);
    throw error;
  }
}

/** Reads an object's first `bytes` into memory — sniffing, image headers. */
export async function readHead(store: BlobStore, key: string, bytes: number, size: number): Promise<Buffer> {
  if (size === 0) return Buffer.alloc(0);
  const stream = await store.read(key, { start: 0, end: Math.min(bytes, size) - 1 });
  const parts: Buffer[] = [];
  let length = 0;
  for await (const part of stream) {
    parts.push(Buffer.from(part as Uint8Array));
    length += (part as Uint8Array).length;
    // A store (or a proxy before it) that ignores the range sends the whole object: leaving the loop
    // ends the read there, instead of streaming gigabytes into memory for a 64 KiB type check.
    if (length >= bytes) break;
  }
  return Buffer.concat(parts).subarray(0, bytes);
}

/** Reads a whole object into memory; callers bound `size` first. */
export async function readAll(store: BlobStore, key: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of await store.read(key)) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

/**
 * The Content-Security-Policy every stored file is served with from Engram's origin: an uploaded HTML
 * file opened there (a browser that renders it despite `attachment`, a view URL) runs no script and is
 * a sandboxed, unique origin, never a page of Engram's with the reader's session.
 */
export const STORED_FILE_CSP = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox";

/** RFC 6266 with an ASCII fallback and the UTF-8 name. */
export function contentDisposition(type: "inline" | "attachment", filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, "_").replace(/["\\]/g, "_");
  return `${type}; filename="${ascii}"; filename*=UTF-8''${extValue(filename)}`;
}

/**
 * RFC 8187's ext-value: encodeURIComponent leaves ' ( ) * ! unescaped, and only ! is an attr-char. A
 * parser that follows the grammar (the `content-disposition` package, for one) refuses the whole
 * header for such a value: "Ann's notes (2).pdf" arrived with no usable name at all.
 */
function extValue(filename: string): string {
  return encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { link, mkdir, open, opendir, readFile, rename, rm, stat, utimes } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { serverSecret, sign, verify } from "@/lib/api/server-secret.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { assertValidKey, BlobMissing, type BlobInfo, type BlobStore, type SignDownloadOptions, type SignedUpload, type SignUploadOptions } from "./blob-store.ts";

/** The name of a file being written before it is moved into place: `<object>.part-<12 hex>`. */
const PART_FILE = /\.part-[0-9a-f]{12}$/;

/** Part files this process is writing now: the sweep of leftovers never takes one, however long its client stalls. */
const writing = new Set<string>();
/**
 * How often a PUT being received touches its part file. `writing` covers only this process: another
 * instance on the same disk (or the Inngest cron step run there) sees a part file's age alone, and
 * removed the file of a PUT whose client had been quiet for 15 minutes, failing that upload with a
 * 500. Touched while it is written, a part file's age means how long nobody has written it.
 */
const PART_TOUCH_EVERY_MS = 60_000;

interface Meta {
  size: number;
  content_type: string;
  sha256: string;
  /**
   * The inode of the bytes it describes. Bytes and metadata are two files, moved into place one after
   * the other: a crash between the two leaves new bytes beside an earlier object's metadata (or none),
   * and only the inode tells such metadata from the object's own. Absent in metadata written before.
   */
  ino?: string;
}

export type UploadCheck =
  | { ok: true; contentType: string; size: number }
  | { ok: false; reason: "invalid_signature" | "expired" };

export type DownloadCheck =
  | { ok: true; filename: string; contentType: string; inline: boolean }
  | { ok: false; reason: "invalid_signature" | "expired" };

/** Thrown by `receive` when the bytes do not match what was signed. */
export class UploadRejected extends Error {
  constructor(
    readonly status: 400 | 409 | 413,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const signingKey = async () => (await serverSecret((await getDatabase()).prisma));

/**
 * The embedded blob store: files under one directory on local disk, each with
 * a small JSON sidecar (size, type, sha256). Upload and download URLs point at
 * Engram itself (/v1/blobs/<key>) and carry an HMAC over the operation, key,
 * type, size and expiry, so a URL cannot be reused for another key, another
 * type, another size, or after it expires.
 */
export class LocalBlobStore implements BlobStore {
  readonly kind = "local" as const;

  constructor(
    readonly root: string,
    private readonly secret: () => Promise<Buffer> = signingKey,
  ) {}

  private file(key: string): string {
    assertValidKey(key);
    return path.join(this.root, ...key.split("/"));
  }

  async signUpload(key: string, options: SignUploadOptions): Promise<SignedUpload> {
    const expires = Math.floor(Date.now() / 1000) + options.expiresIn;
    const payload = uploadPayload(key, options.contentType, options.sizeBytes, expires);
    const sig = sign(await this.secret(), payload, 32);
    const query = new URLSearchParams({ op: "put", type: options.contentType, size: String(options.sizeBytes), expires: String(expires), sig });
    return { url: `${trimSlash(options.baseUrl)}/v1/blobs/${encodeKey(key)}?${query}`, method: "PUT", headers: { "Content-Type": options.contentType } };
  }

  async signDownload(key: string, options: SignDownloadOptions): Promise<string> {
    const expires = Math.floor(Date.now() / 1000) + options.expiresIn;
    const disposition = options.inline ? "inline" : "attachment";
    const sig = sign(await this.secret(), downloadPayload(key, options.filename, options.contentType, disposition, expires), 32);
    const query = new URLSearchParams({ op: "get", filename: options.filename, type: options.contentType, disposition, expires: String(expires), sig });
    return `${trimSlash(options.baseUrl)}/v1/blobs/${encodeKey(key)}?${query}`;
  }

  /** Checks a signed upload URL's query for this key. */
  async checkUpload(key: string, query: URLSearchParams, now = Date.now()): Promise<UploadCheck> {
    const type = query.get("type") ?? "";
    const size = Number(query.get("size"));
    const expires = Number(query.get("expires"));
    const sig = query.get("sig") ?? "";
    if (query.get("op") !== "put" || !Number.isInteger(size) || !Number.isInteger(expires)) return { ok: false, reason: "invalid_signature" };
    if (!verify(await this.secret(), uploadPayload(key, type, size, expires), sig, 32)) return { ok: false, reason: "invalid_signature" };
    if (expires * 1000 < now) return { ok: false, reason: "expired" };
    return { ok: true, contentType: type, size };
  }

  async checkDownload(key: string, query: URLSearchParams, now = Date.now()): Promise<DownloadCheck> {
    const filename = query.get("filename") ?? "";
    const type = query.get("type") ?? "";
    const disposition = query.get("disposition") ?? "";
    const expires = Number(query.get("expires"));
    const sig = query.get("sig") ?? "";
    if (query.get("op") !== "get" || !Number.isInteger(expires)) return { ok: false, reason: "invalid_signature" };
    if (!verify(await this.secret(), downloadPayload(key, filename, type, disposition, expires), sig, 32)) return { ok: false, reason: "invalid_signature" };
    if (expires * 1000 < now) return { ok: false, reason: "expired" };
    return { ok: true, filename, contentType: type, inline: disposition === "inline" };
  }

  /**
   * Streams a signed upload to disk: never more than one chunk in memory, the
   * byte count and sha256 kept on the way, the file linked into place only
   * when exactly `size` bytes arrived. An object is written once.
   */
  async receive(key: string, body: ReadableStream<Uint8Array> | null, expected: { contentType: string; size: number }): Promise<Meta> {
    const target = this.file(key);
    if (await exists(target)) throw new UploadRejected(409, "This object was already uploaded; request a new upload URL", { object_key: key });
    await mkdir(path.dirname(target), { recursive: true });
    const temp = `${target}.part-${randomBytes(6).toString("hex")}`;
    writing.add(temp);
    const touch = setInterval(() => {
      const now = new Date();
      // Before the file exists, or after it went, there is nothing to touch.
      utimes(temp, now, now).catch(() => undefined);
    }, PART_TOUCH_EVERY_MS);
    touch.unref();
    const hash = createHash("sha256");
    let received = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        received += chunk.length;
        if (received > expected.size) {
          callback(new UploadRejected(413, `The upload is larger than the ${expected.size} bytes it was signed for`, { size_bytes: expected.size }));
          return;
        }
        hash.update(chunk);
        callback(null, chunk);
      },
    });
    try {
      const source = body ? Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>) : Readable.from([]);
      const sink = createWriteStream(temp, { flags: "wx" });
      // Only a body that failed first (the client went away mid-way) is the client's fault. Any error of
      // the disk's (full, read-only, permissions, a directory in the way, …) is the server's: a logged
      // 500, not a 400 that blames the client and shows it our paths. A list of the disk's error codes
      // missed every one it did not name. The stream that failed first says which it was: pipeline then
      // destroys the other with the same error.
      let failedFirst: "client" | "disk" | undefined;
      source.once("error", () => (failedFirst ??= "client"));
      sink.once("error", () => (failedFirst ??= "disk"));
      try {
        await pipeline(source, meter, sink);
      } catch (error) {
        if (error instanceof UploadRejected || failedFirst !== "client") throw error;
        // Whatever arrived is discarded (below).
        throw new UploadRejected(400, `The upload did not complete: ${(error as Error).message}`, { received_bytes: received, size_bytes: expected.size });
      }
      if (received !== expected.size) {
        throw new UploadRejected(400, `Truncated upload: received ${received} of ${expected.size} bytes`, { received_bytes: received, size_bytes: expected.size });
      }
      // On disk before they are in place: head() takes bytes in place as whole, metadata or not.
      await syncFile(temp);
      const meta: Meta = { size: received, content_type: expected.contentType, sha256: hash.digest("hex"), ino: await inodeOf(temp) };
      // link() fails if the object exists: of two PUTs racing past the check above, the second loses
      // here instead of replacing bytes whose type and sha256 may already have been checked.
      try {
        await link(temp, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "EEXIST") {
          throw new UploadRejected(409, "This object was already uploaded; request a new upload URL", { object_key: key });
        }
        throw error;
      }
      try {
        await replaceDurably(`${target}.meta.json`, JSON.stringify(meta));
      } catch (error) {
        // The bytes stay, and the upload is done: synced and whole, they are the object from the moment
        // they were linked (head() reports them by size alone, a create hashes them), so a create may
        // already have attached them. Deleting them here left that memory pointing at nothing.
        console.error(`[engram] blobs: the metadata of ${key} could not be written; its bytes are kept, described by their size`, error);
        await syncDirectory(path.dirname(target));
      }
      return { size: meta.size, content_type: meta.content_type, sha256: meta.sha256 };
    } finally {
      clearInterval(touch);
      await rm(temp, { force: true });
      writing.delete(temp);
    }
  }

  /**
   * The object's size, type and sha256 from its metadata. Bytes are only ever put in place whole
   * (receive links them once exactly the signed number arrived and were synced; write renames them
   * synced), so an object whose metadata is missing, cut short, or an earlier object's (a crash
   * between moving the bytes and the metadata into place) is still there: it is reported by its size
   * alone, as a store without recorded hashes reports it, and callers hash it themselves.
   */
  async head(key: string): Promise<BlobInfo | null> {
    const target = this.file(key);
    let info;
    // Twice: a write replacing the object between the stat and the metadata's read shows as a mismatch once.
    for (let attempt = 0; attempt < 2; attempt++) {
      let raw;
      try {
        [info, raw] = await Promise.all([
          stat(target, { bigint: true }),
          readFile(`${target}.meta.json`, "utf8").catch((error: NodeJS.ErrnoException) => {
            if (error.code === "ENOENT") return null;
            throw error;
          }),
        ]);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw error;
      }
      if (!info.isFile()) return null;
      const meta = raw === null ? null : parseMeta(raw);
      if (!meta) break;
      if (meta.size === Number(info.size) && (meta.ino === undefined || meta.ino === String(info.ino))) {
        return { size: meta.size, contentType: meta.content_type, sha256: meta.sha256 };
      }
    }
    return info ? { size: Number(info.size), contentType: undefined } : null;
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const target = this.file(key);
    // Opened now, not when the stream first reads: a delete after this returns cannot cut the stream
    // short, and one before it is BlobMissing.
    const handle = await open(target, "r").catch((error: NodeJS.ErrnoException) => {
      throw error.code === "ENOENT" ? new BlobMissing(key) : error;
    });
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  /**
   * Bytes first, synced and renamed into place, then their metadata the same way: a crash at any
   * point leaves either the earlier object or these bytes whole, without metadata describing them
   * (head() then reports their size alone), never metadata for bytes that are not there.
   */
  async write(key: string, bytes: Buffer, contentType: string): Promise<void> {
    const target = this.file(key);
    await mkdir(path.dirname(target), { recursive: true });
    const temp = `${target}.part-${randomBytes(6).toString("hex")}`;
    writing.add(temp);
    try {
      const handle = await open(temp, "wx");
      let ino: string;
      try {
        await handle.writeFile(bytes);
        await handle.sync();
        ino = String((await handle.stat({ bigint: true })).ino);
      } finally {
        await handle.close();
      }
      await rename(temp, target);
      const meta: Meta = { size: bytes.length, content_type: contentType, sha256: createHash("sha256").update(bytes).digest("hex"), ino };
      await replaceDurably(`${target}.meta.json`, JSON.stringify(meta));
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    } finally {
      writing.delete(temp);
    }
  }

  /**
   * Removes the part files of writes that never finished and were last written before `before`:
   * a crash or a kill mid-upload skips the cleanup in `receive`, and nothing else ever looks at
   * them (no upload record names them). A PUT still streaming keeps moving its file's mtime (each
   * chunk written, and a touch every minute while its client is quiet: any instance's sweep sees
   * that), and this process's own are skipped whatever their age. Returns how many went.
   */
  async sweepPartials(before: Date): Promise<number> {
    let removed = 0;
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await opendir(dir);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
        throw error;
      }
      // Streamed, one entry at a time: a directory of many objects is never listed into memory whole.
      for await (const entry of entries) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(file);
        else if (entry.isFile() && PART_FILE.test(entry.name) && !writing.has(file)) {
          const info = await stat(file).catch(() => null);
          if (info && info.mtimeMs < before.getTime()) {
            await rm(file, { force: true });
            removed += 1;
          }
        }
      }
    };
    await walk(this.root);
    return removed;
  }

  async delete(key: string): Promise<void> {
    const target = this.file(key);
    await Promise.all([rm(target, { force: true }), rm(`${target}.meta.json`, { force: true })]);
  }
}

// JSON, not fields joined by a separator: a filename (a client's) may hold any character, and one
// holding the separator could move the signed bytes into the fields after it (another type or
// disposition under the same signature). URLs signed the old way are refused and simply expire.
const uploadPayload = (key: string, type: string, size: number, expires: number) => JSON.stringify(["blob-put", key, type, size, expires]);
const downloadPayload = (key: string, filename: string, type: string, disposition: string, expires: number) =>
  JSON.stringify(["blob-get", key, filename, type, disposition, expires]);
const trimSlash = (url: string) => url.replace(/\/+$/, "");
const encodeKey = (key: string) => key.split("/").map(encodeURIComponent).join("/");

/** Writes a small file whole or not at all: synced under a part name, then renamed over `file`. */
async function replaceDurably(file: string, text: string): Promise<void> {
  const temp = `${file}.part-${randomBytes(6).toString("hex")}`;
  writing.add(temp);
  try {
    const handle = await open(temp, "wx");
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
    await syncDirectory(path.dirname(file));
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  } finally {
    writing.delete(temp);
  }
}

async function syncFile(file: string): Promise<void> {
  const handle = await open(file, "r+");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Makes the renames in `dir` durable; a platform that cannot open a directory for it skips that. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r").catch(() => null);
  if (!handle) return;
  try {
    await handle.sync().catch(() => undefined);
  } finally {
    await handle.close();
  }
}

async function inodeOf(file: string): Promise<string> {
  return String((await stat(file, { bigint: true })).ino);
}

/** Metadata cut short (a crash mid-write before it was written atomically) describes nothing. */
function parseMeta(raw: string): Meta | null {
  try {
    const meta = JSON.parse(raw) as Meta;
    return typeof meta?.size === "number" && typeof meta.sha256 === "string" ? meta : null;
  } catch {
    return null;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

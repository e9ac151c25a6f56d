import { blobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { UNATTACHED_UPLOAD_TTL_MS, UPLOAD_URL_TTL_SECONDS } from "./upload-limits.ts";

export const SWEEP_BATCH = 200;

/** The created_at a detached upload is given: expired at once, for the sweep, and never attachable again. */
export const detachedAt = new Date(0);

/**
 * Inside the transaction that deletes memories: their uploads become
 * unattached and expired, so if removing the bytes afterwards fails, the
 * sweep still finds and removes them.
 */
export async function detachUploads(tx: DbClient, where: { memoryId: { in: string[] } } | { hubId: string }): Promise<string[]> {
  const keys = (await tx.attachment.findMany({ where, select: { objectKey: true } })).map((a) => a.objectKey);
  await detachObjects(tx, keys);
  return keys;
}

/** Marks these objects' uploads unattached and expired (see detachUploads). */
export async function detachObjects(tx: DbClient, keys: string[]): Promise<void> {
  if (keys.length) await tx.upload.updateMany({ where: { objectKey: { in: keys } }, data: { attachedAt: null, createdAt: detachedAt } });
}

/**
 * After the commit: the bytes and upload records go now (best effort; the sweep retries). Returns how many went.
 * With S3 or Vercel Blob the upload URL of a removed object still writes (the bucket checks only that
 * no object is there) until it expires, and bytes nothing refers to would stay for good: the record is
 * kept, detached, until its URL expired, so the sweep removes whatever such a PUT left. The embedded
 * store refuses those PUTs itself (assertUploadOpen).
 */
export async function removeBlobs(db: Db, keys: string[], now = new Date()): Promise<number> {
  if (!keys.length) return 0;
  const store = await blobStore();
  const removed: string[] = [];
  await Promise.all(
    keys.map(async (key) => {
      try {
        await store.delete(key);
        removed.push(key);
      } catch (error) {
        console.error(`[engram] uploads: could not delete ${key}; the sweep will retry`, error);
      }
    }),
  );
  if (removed.length) {
    await db.upload.deleteMany({ where: { objectKey: { in: removed }, attachedAt: null, ...(store.kind !== "local" && { expiresAt: { lte: now } }) } });
  }
  return removed.length;
}

/**
 * Deletes uploads no memory attached within 24 hours (bytes first, then the record). Returns how many
 * were removed: a batch whose deletes fail (a store refusing them) counts for nothing, so a caller
 * looping while whole batches go stops instead of retrying the same rows for ever.
 */
export async function sweepUploads(db: Db, now = new Date()): Promise<number> {
  const stale = await db.upload.findMany({
    // A removed file's record waits for its upload URL to expire (removeBlobs) before it is swept.
    where: {
      attachedAt: null,
      createdAt: { lt: new Date(now.getTime() - UNATTACHED_UPLOAD_TTL_MS) },
      OR: [{ createdAt: { not: detachedAt } }, { expiresAt: { lte: now } }],
    },
    select: { objectKey: true },
    orderBy: { createdAt: "asc" },
    take: SWEEP_BATCH,
  });
  return removeBlobs(db, stale.map((u) => u.objectKey), now);
}

/**
 * The embedded store's part files of uploads cut off by a crash (see LocalBlobStore.sweepPartials),
 * once untouched for longer than an upload URL lives: by then no client is still sending to them.
 * Returns how many went (0 with another store, whose uploads never touch our disk).
 */
export async function sweepPartialUploads(now = new Date()): Promise<number> {
  const store = await blobStore();
  if (!(store instanceof LocalBlobStore)) return 0;
  return store.sweepPartials(new Date(now.getTime() - UPLOAD_URL_TTL_SECONDS * 1000));
}

/** Runs the sweep hourly in this process (without Inngest; with it, inngest/upload-functions.ts does); returns the stop function. */
export function startUploadSweeper(db: () => Promise<Db>, everyMs = 60 * 60 * 1000): () => void {
  let running = false;
  const run = async () => {
    // One sweep at a time: a slow one (a large backlog, a slow store) is not joined by the next hour's.
    if (running) return;
    running = true;
    try {
      while ((await sweepUploads(await db())) === SWEEP_BATCH);
      await sweepPartialUploads();
    } catch (error) {
      console.error("[engram] uploads: sweep failed", error);
    } finally {
      running = false;
    }
  };
  const first = setTimeout(() => void run(), 60_000);
  const timer = setInterval(() => void run(), everyMs);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}

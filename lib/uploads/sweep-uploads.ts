import { blobStore } from "@/lib/blobs/blob-store.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { UNATTACHED_UPLOAD_TTL_MS } from "./upload-limits.ts";

export const SWEEP_BATCH = 200;

/**
 * Inside the transaction that deletes memories: their uploads become
 * unattached and expired, so if removing the bytes afterwards fails, the
 * sweep still finds and removes them.
 */
export async function detachUploads(tx: DbClient, where: { memoryId: { in: string[] } } | { hubId: string }): Promise<string[]> {
  const keys = (await tx.attachment.findMany({ where, select: { objectKey: true } })).map((a) => a.objectKey);
  if (keys.length) await tx.upload.updateMany({ where: { objectKey: { in: keys } }, data: { attachedAt: null, createdAt: new Date(0) } });
  return keys;
}

/** After the commit: the bytes and upload records go now (best effort; the sweep retries). */
export async function removeBlobs(db: Db, keys: string[]): Promise<void> {
  if (!keys.length) return;
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
  if (removed.length) await db.upload.deleteMany({ where: { objectKey: { in: removed }, attachedAt: null } });
}

/** Deletes uploads no memory attached within 24 hours (bytes first, then the record). */
export async function sweepUploads(db: Db, now = new Date()): Promise<number> {
  const stale = await db.upload.findMany({
    where: { attachedAt: null, createdAt: { lt: new Date(now.getTime() - UNATTACHED_UPLOAD_TTL_MS) } },
    select: { objectKey: true },
    orderBy: { createdAt: "asc" },
    take: SWEEP_BATCH,
  });
  await removeBlobs(db, stale.map((u) => u.objectKey));
  return stale.length;
}

/** Runs the sweep hourly in this process (without Inngest; with it, inngest/upload-functions.ts does); returns the stop function. */
export function startUploadSweeper(db: () => Promise<Db>, everyMs = 60 * 60 * 1000): () => void {
  const run = async () => {
    try {
      while ((await sweepUploads(await db())) === SWEEP_BATCH);
    } catch (error) {
      console.error("[engram] uploads: sweep failed", error);
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

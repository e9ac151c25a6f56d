import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { BlobStore } from "@/lib/blobs/blob-store.ts";
import { detachedAt } from "./sweep-uploads.ts";

/**
 * A signed upload URL is good for its upload only while that upload waits for its bytes: once a memory
 * attached it, or it was detached or deleted (its memory deleted, the sweep), a PUT is refused. The
 * signature alone would let the URL write again for its 15 minutes: bytes nothing refers to any more,
 * which no sweep would ever find.
 */
export async function assertUploadOpen(ctx: RequestContext, objectKey: string): Promise<void> {
  const upload = await ctx.db.upload.findUnique({ where: { objectKey }, select: { attachedAt: true, createdAt: true } });
  if (!upload || upload.attachedAt || upload.createdAt.getTime() === detachedAt.getTime()) {
    throw new ApiError("conflict", "This upload is closed (attached, or removed); request a new upload URL", { object_key: objectKey });
  }
}

/**
 * After a PUT's bytes landed: its upload may have gone while they streamed in (its owner emptied the
 * account, which detaches unattached uploads and removes their objects, none there yet). Kept, they
 * would be bytes no record names, which no sweep ever finds: they go, and the PUT is refused as it
 * would have been had it started a moment later. An upload attached meanwhile keeps them: a push
 * naming it may commit as soon as they are in place.
 */
export async function assertUploadNotRemoved(ctx: RequestContext, store: BlobStore, objectKey: string): Promise<void> {
  const upload = await ctx.db.upload.findUnique({ where: { objectKey }, select: { createdAt: true } });
  if (upload && upload.createdAt.getTime() !== detachedAt.getTime()) return;
  await store.delete(objectKey).catch((cause: unknown) => console.error(`[engram] uploads: could not delete ${objectKey}, written after its upload was removed`, cause));
  throw new ApiError("conflict", "This upload was removed while its bytes arrived; request a new upload URL", { object_key: objectKey });
}

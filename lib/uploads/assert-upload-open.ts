import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
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

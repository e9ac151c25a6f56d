import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { blobStore } from "@/lib/blobs/blob-store.ts";
import { serializeAttachment } from "@/lib/memories/serialize-memory.ts";
import { VIEW_URL_TTL_SECONDS } from "@/lib/uploads/upload-limits.ts";
import { findAttachmentOrThrow } from "./find-attachment.ts";

/** A short-lived signed URL that shows an image attachment inline (for <img src>). */
export async function createViewUrl(ctx: AuthContext, memoryId: string, attachmentId: string, baseUrl: string) {
  const attachment = await findAttachmentOrThrow(ctx, memoryId, attachmentId);
  if (!serializeAttachment(attachment, "").inline_eligible) {
    throw new ApiError("unsupported_content_type", "Only raster images can be viewed inline; download the file instead", {
      content_type: attachment.contentType,
    });
  }
  const expiresAt = Math.floor(ctx.now().getTime() / 1000) + VIEW_URL_TTL_SECONDS;
  const url = await (await blobStore()).signDownload(attachment.objectKey, {
    filename: attachment.filename,
    contentType: attachment.contentType,
    inline: true,
    expiresIn: VIEW_URL_TTL_SECONDS,
    baseUrl,
  });
  return { url, expires_at: expiresAt };
}

import { Readable } from "node:stream";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { blobStore, contentDisposition, readOrNotFound, STORED_FILE_CSP } from "@/lib/blobs/blob-store.ts";
import { findAttachmentOrThrow } from "./find-attachment.ts";

/**
 * The original file, streamed from storage with its name (never rendered inline here). A HEAD gets the
 * headers alone: Next sends no body for it and never cancels one, so a read opened for it kept a file
 * handle (with S3, one of the client's sockets) until garbage collection.
 */
export async function downloadAttachment(ctx: AuthContext, memoryId: string, attachmentId: string, headOnly = false): Promise<Response> {
  const attachment = await findAttachmentOrThrow(ctx, memoryId, attachmentId);
  const store = await blobStore();
  const info = await store.head(attachment.objectKey);
  const missing = "The attachment's file is missing from storage";
  if (!info) throw new ApiError("not_found", missing);
  const stream = headOnly ? null : Readable.toWeb(await readOrNotFound(store, attachment.objectKey, missing));
  return new Response(stream as ReadableStream | null, {
    headers: {
      "content-type": attachment.contentType,
      "content-length": String(info.size),
      "content-disposition": contentDisposition("attachment", attachment.filename),
      "x-content-type-options": "nosniff",
      "content-security-policy": STORED_FILE_CSP,
      "cache-control": "private, no-store",
      ...(attachment.sha256 && { digest: `sha-256=${Buffer.from(attachment.sha256, "hex").toString("base64")}` }),
    },
  });
}

import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { blobStore } from "@/lib/blobs/blob-store.ts";
import { newId } from "@/lib/ids.ts";
import { declaredEncoding } from "@/lib/links/decode-page.ts";
import {
  ALLOWED_UPLOAD_TYPES,
  isAllowedType,
  isTextType,
  maxPendingUploads,
  maxUploadBytes,
  normalizeContentType,
  UNATTACHED_UPLOAD_TTL_MS,
  UPLOAD_PURPOSES,
  UPLOAD_URL_TTL_SECONDS,
} from "./upload-limits.ts";
import { uploadFilenameSchema } from "./upload-filename-schema.ts";

export const createUploadBodySchema = z.object({
  filename: uploadFilenameSchema,
  // The 415 for other types comes from createUpload (it names the allowed ones); the pattern tells
  // OpenAPI readers the same thing up front.
  content_type: z
    .string()
    .trim()
    .min(1)
    .max(200)
    .meta({ pattern: `^(${ALLOWED_UPLOAD_TYPES.map((type) => type.replace(/[.+]/g, "\\$&")).join("|")})(;.*)?$` }),
  size_bytes: z.int().min(1, "size_bytes must be at least 1"),
  purpose: z.enum(UPLOAD_PURPOSES).default("memory_attachment"),
});
export type CreateUploadBody = z.output<typeof createUploadBodySchema>;

/**
 * An upload intent: checks type and size, records who may attach the object,
 * and hands out a signed PUT target (Engram itself for the embedded store, the
 * bucket for S3). The object key is Engram's, never the client's.
 */
export async function createUpload(ctx: AuthContext, input: CreateUploadBody, baseUrl: string) {
  const contentType = normalizeContentType(input.content_type);
  if (!isAllowedType(contentType)) {
    throw new ApiError("unsupported_content_type", `Files of type ${contentType} cannot be uploaded`, {
      content_type: contentType,
      allowed: ALLOWED_UPLOAD_TYPES,
    });
  }
  const maxBytes = maxUploadBytes();
  if (input.size_bytes > maxBytes) {
    throw new ApiError("file_too_large", `The file is ${input.size_bytes} bytes; the limit is ${maxBytes}`, { size_bytes: input.size_bytes, max_bytes: maxBytes });
  }
  const now = ctx.now();
  const id = newId(now.getTime());
  const objectKey = `uploads/${ctx.user.id}/${id}`;
  // A text file's declared charset is kept with the upload (the stored type says how to read its
  // bytes; the object itself is signed and stored under the bare type).
  const charset = isTextType(contentType) ? declaredEncoding(input.content_type) : null;
  const store = await blobStore();
  const signed = await store.signUpload(objectKey, { contentType, sizeBytes: input.size_bytes, expiresIn: UPLOAD_URL_TTL_SECONDS, baseUrl });
  await ctx.db.$transaction(async (tx) => {
    // Counted under the user's row lock: requests racing past one count would each add one more.
    await tx.$executeRaw`SELECT 1 FROM users WHERE id = ${ctx.user.id}::uuid FOR UPDATE`;
    const pending = await tx.upload.count({
      where: { ownerId: ctx.user.id, attachedAt: null, createdAt: { gt: new Date(now.getTime() - UNATTACHED_UPLOAD_TTL_MS) } },
    });
    const maxPending = maxPendingUploads();
    if (pending >= maxPending) {
      throw new ApiError("quota_exceeded", `You have ${pending} uploads not attached to a memory yet; attach them first (or wait for unattached ones to expire after 24 hours)`, {
        pending_uploads: pending,
        max_pending_uploads: maxPending,
      });
    }
    await tx.upload.create({
      data: {
        id,
        ownerId: ctx.user.id,
        objectKey,
        filename: input.filename,
        contentType: charset ? `${contentType}; charset=${charset}` : contentType,
        sizeBytes: input.size_bytes,
        purpose: input.purpose,
        createdAt: now,
        expiresAt: new Date(now.getTime() + UPLOAD_URL_TTL_SECONDS * 1000),
      },
    });
  });
  const fileRef = { object_key: objectKey, filename: input.filename, content_type: contentType, size_bytes: input.size_bytes };
  return {
    object_key: objectKey,
    upload_url: signed.url,
    method: signed.method,
    headers: signed.headers,
    filename: input.filename,
    content_type: contentType,
    size_bytes: input.size_bytes,
    purpose: input.purpose,
    max_bytes: maxBytes,
    expires_in: UPLOAD_URL_TTL_SECONDS,
    file_ref: fileRef,
  };
}

import { createHash } from "node:crypto";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { BlobMissing, blobStore, readHead } from "@/lib/blobs/blob-store.ts";
import type { Upload } from "@/lib/db/generated/client.ts";
import { declaredEncoding, textEncoding } from "@/lib/links/decode-page.ts";
import { imageSize, matchesDeclared, sniffFileType } from "./sniff-file-type.ts";
import { ATTACHABLE_FOR_MS, isAllowedType, isImageType, isTextType, normalizeContentType } from "./upload-limits.ts";

export interface FileRefInput {
  object_key: string;
  filename: string;
  content_type: string;
  size_bytes?: number;
  sha256?: string;
}

export interface VerifiedFile {
  upload: Upload;
  filename: string;
  contentType: string;
  /** The charset the upload declared for a text file (how extraction reads its bytes), if any. */
  charset: string | null;
  sizeBytes: number;
  sha256: string;
  width: number | null;
  height: number | null;
}

const SNIFF_BYTES = 64 * 1024;
/**
 * A JPEG's size is in its frame header, after its metadata segments (EXIF with a thumbnail, ICC
 * profiles: up to 64 KiB each), which can push it past the sniffed part; this much is read for it.
 */
const JPEG_HEADER_BYTES = 1024 * 1024;

const refError = (message: string, details: Record<string, unknown> = {}) =>
  new ApiError("invalid_request", message, { issues: [{ path: "file_ref", message }], ...details });

/**
 * Checks a create's file_ref against what was really stored: the caller's own
 * upload, present, of the promised size (and sha256 when given), and of the
 * type it claims to be — judged from its bytes, not its name.
 */
export async function resolveFileRef(ctx: AuthContext, ref: FileRefInput): Promise<VerifiedFile> {
  // Another user's object is indistinguishable from one that does not exist.
  const upload = await ctx.db.upload.findFirst({ where: { objectKey: ref.object_key, ownerId: ctx.user.id } });
  if (!upload) throw refError("file_ref does not name an upload of yours");
  if (upload.attachedAt) throw new ApiError("conflict", "This upload is already attached to a memory; upload the file again", { object_key: ref.object_key });
  if (upload.createdAt.getTime() <= ctx.now().getTime() - ATTACHABLE_FOR_MS) {
    throw new ApiError("conflict", "This upload is too old to attach (unattached uploads are removed after 24 hours); upload the file again", { object_key: ref.object_key });
  }
  const declared = normalizeContentType(ref.content_type);
  // The upload's type may carry the charset it declared; the bare type is the one compared.
  const contentType = normalizeContentType(upload.contentType);
  if (declared !== contentType) {
    throw refError(`file_ref content_type ${declared} differs from the upload's ${contentType}`);
  }
  const store = await blobStore();
  const info = await store.head(upload.objectKey);
  if (!info) throw refError("The file has not been uploaded yet (PUT it to upload_url first)", { object_key: upload.objectKey });
  if (info.size !== upload.sizeBytes || (ref.size_bytes !== undefined && info.size !== ref.size_bytes)) {
    throw refError(`The stored file is ${info.size} bytes, not ${ref.size_bytes ?? upload.sizeBytes}`, {
      size_bytes: info.size,
      expected_size_bytes: ref.size_bytes ?? upload.sizeBytes,
    });
  }
  const head = await readHead(store, upload.objectKey, SNIFF_BYTES, info.size).catch(gone(upload));
  // Text is judged in the encoding extraction will read it in, so a windows-1252 or UTF-16 file is text too.
  const sniffed = sniffFileType(head, isTextType(contentType) ? textEncoding(head, upload.contentType, contentType === "text/html") : "utf-8");
  if (!isAllowedType(contentType) || !matchesDeclared(contentType, sniffed)) {
    throw new ApiError("unsupported_content_type", `The file's bytes are not ${contentType} (they look like ${sniffed})`, {
      content_type: contentType,
      detected: sniffed,
    });
  }
  // After the type check, which reads 64 KiB: hashing may read the whole object (up to 2 GiB).
  const sha256 = info.sha256 ?? upload.sha256 ?? (await hashObject(ctx, upload).catch(gone(upload)));
  if (ref.sha256 !== undefined && ref.sha256.toLowerCase() !== sha256) {
    throw refError("The stored file's sha256 differs from file_ref.sha256", { sha256 });
  }
  let size = isImageType(contentType) ? imageSize(head, contentType) : null;
  if (!size && contentType === "image/jpeg" && info.size > head.length) {
    size = imageSize(await readHead(store, upload.objectKey, JPEG_HEADER_BYTES, info.size).catch(gone(upload)), contentType);
  }
  return {
    upload,
    filename: ref.filename || upload.filename,
    contentType,
    charset: isTextType(contentType) ? declaredEncoding(upload.contentType) : null,
    sizeBytes: info.size,
    sha256,
    width: size?.width ?? null,
    height: size?.height ?? null,
  };
}

/**
 * The object went after head() found it (its upload removed meanwhile: the account emptied): the
 * create fails as it would have a moment later, on the caller's file_ref, not as the server's error.
 */
const gone =
  (upload: Upload) =>
  (error: unknown): never => {
    if (error instanceof BlobMissing) throw refError("The uploaded file is no longer in storage; upload it again", { object_key: upload.objectKey });
    throw error;
  };

/**
 * Reads the whole object through the server (S3 and Vercel Blob record no sha256): as long as its
 * download takes. Kept on the upload, so a create that fails after it (a wrong sha256, a type
 * mismatch, a quota) and is sent again does not read it all again; the object is written once.
 */
async function hashObject(ctx: AuthContext, upload: Upload): Promise<string> {
  const hash = createHash("sha256");
  for await (const part of await (await blobStore()).read(upload.objectKey)) hash.update(part as Uint8Array);
  const sha256 = hash.digest("hex");
  await ctx.db.upload.updateMany({ where: { id: upload.id, sha256: null }, data: { sha256 } });
  return sha256;
}

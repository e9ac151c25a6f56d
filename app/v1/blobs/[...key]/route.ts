import { Readable } from "node:stream";
import { ok } from "@/lib/api/envelope.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { methodsNotAllowed, withPublic } from "@/lib/api/with-auth.ts";
import { blobStore, contentDisposition, readOrNotFound, STORED_FILE_CSP } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore, UploadRejected } from "@/lib/blobs/local-blob-store.ts";
import { assertUploadOpen, assertUploadNotRemoved } from "@/lib/uploads/assert-upload-open.ts";

/** The catch-all segment arrives as an array of path parts. */
const keyOf = (params: Record<string, unknown>) => {
  const parts = params.key;
  return Array.isArray(parts) ? parts.join("/") : String(parts ?? "");
};

async function localStore(): Promise<LocalBlobStore> {
  const store = await blobStore();
  if (!(store instanceof LocalBlobStore)) throw new ApiError("not_found", "Not found");
  return store;
}

const refused = (reason: string) =>
  new ApiError("forbidden", reason === "expired" ? "This signed URL has expired" : "This signed URL is not valid for this object", { reason });

// PUT /v1/blobs/{key} — the embedded store receives an upload through its signed URL (streamed to disk)
export const PUT = withPublic({ bucket: "regular" }, async (ctx, req, params) => {
  const store = await localStore();
  const key = keyOf(params);
  const check = await store.checkUpload(key, new URL(req.url).searchParams);
  if (!check.ok) throw refused(check.reason);
  await assertUploadOpen(ctx, key);
  const sentType = (req.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (sentType !== check.contentType) {
    throw new ApiError("forbidden", `Content-Type must be ${check.contentType}, as signed`, { reason: "content_type_mismatch", expected: check.contentType });
  }
  const length = req.headers.get("content-length");
  if (length !== null && Number(length) !== check.size) {
    throw new ApiError(Number(length) > check.size ? "file_too_large" : "invalid_request", `Content-Length must be ${check.size}, as signed`, {
      size_bytes: check.size,
      content_length: Number(length),
    });
  }
  try {
    const meta = await store.receive(key, req.body, { contentType: check.contentType, size: check.size });
    await assertUploadNotRemoved(ctx, store, key);
    return ok({ object_key: key, size_bytes: meta.size, sha256: meta.sha256 });
  } catch (error) {
    if (!(error instanceof UploadRejected)) throw error;
    const code = error.status === 413 ? "file_too_large" : error.status === 409 ? "conflict" : "invalid_request";
    throw new ApiError(code, error.message, error.details);
  }
});

// GET /v1/blobs/{key} — the embedded store serves a file through its signed download/view URL
export const GET = withPublic({ bucket: "light" }, async (_ctx, req, params) => {
  const store = await localStore();
  const key = keyOf(params);
  const check = await store.checkDownload(key, new URL(req.url).searchParams);
  if (!check.ok) throw refused(check.reason);
  const info = await store.head(key);
  if (!info) throw new ApiError("not_found", "Not found");
  // A HEAD gets no body from Next, which never cancels one: a read opened for it kept its file handle.
  const stream = req.method === "HEAD" ? null : Readable.toWeb(await readOrNotFound(store, key, "Not found"));
  return new Response(stream as ReadableStream | null, {
    headers: {
      "content-type": check.contentType,
      "content-length": String(info.size),
      "content-disposition": contentDisposition(check.inline ? "inline" : "attachment", check.filename),
      "cache-control": "private, max-age=300",
      "x-content-type-options": "nosniff",
      "content-security-policy": STORED_FILE_CSP,
    },
  });
});

export const { POST, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "PUT");

import { Readable } from "node:stream";
import {
  BlobError,
  BlobNotFoundError,
  BlobRequestAbortedError,
  BlobServiceNotAvailable,
  BlobServiceRateLimited,
  BlobUnknownError,
  del,
  head,
  issueSignedToken,
  presignUrl,
  put,
  type DelegationOperation,
} from "@vercel/blob";
import { ApiError } from "@/lib/api/errors.ts";
import { assertValidKey, BlobMissing, blobTimeoutMs, failWhenStalled, storageUnavailable, type BlobInfo, type BlobStore, type SignDownloadOptions, type SignedUpload, type SignUploadOptions } from "./blob-store.ts";

export interface VercelBlobOptions {
  /** The store's read-write token (BLOB_READ_WRITE_TOKEN). */
  token: string;
  /** The store's access mode: private stores (the default) serve objects only through signed URLs. */
  access: "private" | "public";
  /** Longest wait for one call to the Blob API, or for the next bytes of a read its reader is waiting for (blobTimeoutMs). */
  timeoutMs?: number;
}

/** How long Engram's own reads (extraction, streaming a download) may take to start. */
const READ_URL_SECONDS = 300;

/**
 * Vercel Blob. The client PUTs straight to the Blob API with a presigned URL
 * scoped to one pathname, the declared Content-Type and at most the declared
 * size (no overwrite, no random suffix); downloads and inline views are
 * presigned GETs of the object, so a private store never exposes a file
 * without a short-lived signature. Engram itself reads through presigned GETs
 * too and checks size and hash at create time, as with S3.
 */
export class VercelBlobStore implements BlobStore {
  readonly kind = "vercel" as const;

  private readonly timeoutMs: number;

  constructor(private readonly options: VercelBlobOptions) {
    this.timeoutMs = options.timeoutMs ?? blobTimeoutMs();
  }

  /**
   * One call to the Blob API within the deadline. The SDK retries a silent or overloaded API 10 times,
   * waiting 1 s, 2 s, 4 s … in between (about 17 minutes), and never times a request out: a push
   * checking its file waited all that long, or for good. The abort also ends the SDK's retries.
   */
  private async call<T>(run: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new Error(`the Blob API did not answer within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([run(controller.signal), expired]);
    } catch (error) {
      throw unanswered(error);
    } finally {
      clearTimeout(timer);
    }
  }

  private async presign(key: string, operation: DelegationOperation, expiresIn: number, upload?: { contentType: string; sizeBytes: number }): Promise<string> {
    assertValidKey(key);
    const validUntil = Date.now() + expiresIn * 1000;
    const signed = await this.call((abortSignal) =>
      issueSignedToken({
        abortSignal,
        token: this.options.token,
        pathname: key,
        operations: [operation],
        validUntil,
        ...(upload && { allowedContentTypes: [upload.contentType], maximumSizeInBytes: upload.sizeBytes }),
      }),
    );
    const common = { pathname: key, validUntil, access: this.options.access } as const;
    const { presignedUrl } = await presignUrl(
      signed,
      operation === "put" && upload
        ? { ...common, operation: "put", allowedContentTypes: [upload.contentType], maximumSizeInBytes: upload.sizeBytes, allowOverwrite: false, addRandomSuffix: false }
        : { ...common, operation: operation as "get" | "head" | "delete" },
    );
    return presignedUrl;
  }

  async signUpload(key: string, options: SignUploadOptions): Promise<SignedUpload> {
    const url = await this.presign(key, "put", options.expiresIn, { contentType: options.contentType, sizeBytes: options.sizeBytes });
    // The Blob API takes the object's type from x-content-type (Content-Type is kept for plain HTTP clients).
    return { url, method: "PUT", headers: { "Content-Type": options.contentType, "x-content-type": options.contentType } };
  }

  async signDownload(key: string, options: SignDownloadOptions): Promise<string> {
    const url = new URL(await this.presign(key, "get", options.expiresIn));
    // Outside the signed payload, like the SDK's own downloadUrl: asks the CDN for an attachment.
    if (!options.inline) url.searchParams.set("download", "1");
    return url.toString();
  }

  async head(key: string): Promise<BlobInfo | null> {
    assertValidKey(key);
    try {
      const info = await this.call((abortSignal) => head(key, { token: this.options.token, abortSignal }));
      return { size: info.size, contentType: info.contentType || undefined };
    } catch (error) {
      if (error instanceof BlobNotFoundError) return null;
      throw error;
    }
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const url = await this.presign(key, "get", READ_URL_SECONDS);
    // Aborted when the answer does not come within the timeout, or when the body then stalls while read.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    const res = await fetch(url, { headers: range ? { range: `bytes=${range.start}-${range.end}` } : {}, signal: controller.signal })
      .catch((error: unknown) => {
        throw storageUnavailable("vercel", error);
      })
      .finally(() => clearTimeout(timer));
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      if (res.status === 404) throw new BlobMissing(key);
      if (res.status >= 500 || res.status === 429) throw storageUnavailable("vercel", new Error(`reading ${key} failed with HTTP ${res.status}`));
      throw new Error(`vercel blob: reading ${key} failed with HTTP ${res.status}`);
    }
    return failWhenStalled(Readable.fromWeb(res.body as import("node:stream/web").ReadableStream), this.timeoutMs, () => {
      controller.abort();
      return storageUnavailable("vercel", new Error(`reading ${key} stalled: no bytes for ${this.timeoutMs} ms`));
    });
  }

  async write(key: string, bytes: Buffer, contentType: string): Promise<void> {
    assertValidKey(key);
    await this.call((abortSignal) => put(key, bytes, { access: this.options.access, token: this.options.token, contentType, addRandomSuffix: false, allowOverwrite: true, abortSignal }));
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    // Deleting a missing object succeeds (the API ignores unknown URLs).
    await this.call((abortSignal) => del(key, { token: this.options.token, abortSignal }));
  }
}

/** No answer in time, none at all, or the service overloaded: unavailable (503); any other error is kept. */
function unanswered(error: unknown): unknown {
  if (error instanceof ApiError || error instanceof BlobNotFoundError) return error;
  const noAnswer =
    error instanceof BlobRequestAbortedError ||
    error instanceof BlobServiceNotAvailable ||
    error instanceof BlobServiceRateLimited ||
    error instanceof BlobUnknownError ||
    !(error instanceof BlobError);
  return noAnswer ? storageUnavailable("vercel", error) : error;
}

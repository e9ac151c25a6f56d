import { Readable } from "node:stream";
import { BlobNotFoundError, del, head, issueSignedToken, presignUrl, put, type DelegationOperation } from "@vercel/blob";
import { assertValidKey, BlobMissing, type BlobInfo, type BlobStore, type SignDownloadOptions, type SignedUpload, type SignUploadOptions } from "./blob-store.ts";

export interface VercelBlobOptions {
  /** The store's read-write token (BLOB_READ_WRITE_TOKEN). */
  token: string;
  /** The store's access mode: private stores (the default) serve objects only through signed URLs. */
  access: "private" | "public";
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

  constructor(private readonly options: VercelBlobOptions) {}

  private async presign(key: string, operation: DelegationOperation, expiresIn: number, upload?: { contentType: string; sizeBytes: number }): Promise<string> {
    assertValidKey(key);
    const validUntil = Date.now() + expiresIn * 1000;
    const signed = await issueSignedToken({
      token: this.options.token,
      pathname: key,
      operations: [operation],
      validUntil,
      ...(upload && { allowedContentTypes: [upload.contentType], maximumSizeInBytes: upload.sizeBytes }),
    });
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
      const info = await head(key, { token: this.options.token });
      return { size: info.size, contentType: info.contentType || undefined };
    } catch (error) {
      if (error instanceof BlobNotFoundError) return null;
      throw error;
    }
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const url = await this.presign(key, "get", READ_URL_SECONDS);
    const res = await fetch(url, { headers: range ? { range: `bytes=${range.start}-${range.end}` } : {} });
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      if (res.status === 404) throw new BlobMissing(key);
      throw new Error(`vercel blob: reading ${key} failed with HTTP ${res.status}`);
    }
    return Readable.fromWeb(res.body as import("node:stream/web").ReadableStream);
  }

  async write(key: string, bytes: Buffer, contentType: string): Promise<void> {
    assertValidKey(key);
    await put(key, bytes, { access: this.options.access, token: this.options.token, contentType, addRandomSuffix: false, allowOverwrite: true });
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    // Deleting a missing object succeeds (the API ignores unknown URLs).
    await del(key, { token: this.options.token });
  }
}

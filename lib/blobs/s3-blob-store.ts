import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { Readable } from "node:stream";
import { assertValidKey, BlobMissing, blobTimeoutMs, contentDisposition, failWhenStalled, storageUnavailable, type BlobInfo, type BlobStore, type SignDownloadOptions, type SignedUpload, type SignUploadOptions } from "./blob-store.ts";

export interface S3Options {
  bucket: string;
  endpoint?: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** MinIO and most local S3 servers want path-style URLs. */
  forcePathStyle: boolean;
  /** Longest wait for a connection, an answer, or the next bytes of a read its reader is waiting for (blobTimeoutMs). */
  timeoutMs?: number;
}

/**
 * S3-compatible storage (AWS S3, Cloudflare R2, MinIO). The client PUTs
 * straight to the bucket with a presigned URL whose signature covers the key,
 * Content-Type, Content-Length and If-None-Match, so the bytes never pass through Engram
 * and an object, once written, is never replaced through it.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = "s3" as const;
  private readonly client: S3Client;
  /** GETs of objects, whose bodies a download's reader may hold back for as long as it pauses. */
  private readonly reader: S3Client;
  private readonly timeoutMs: number;

  constructor(private readonly options: S3Options) {
    const timeoutMs = (this.timeoutMs = options.timeoutMs ?? blobTimeoutMs());
    const common = {
      maxAttempts: 2,
      region: options.region,
      endpoint: options.endpoint,
      forcePathStyle: options.forcePathStyle,
      // Checksums only when an operation needs them: R2, MinIO and older S3 clones reject the newer defaults.
      requestChecksumCalculation: "WHEN_REQUIRED",
      responseChecksumValidation: "WHEN_REQUIRED",
      ...(options.accessKeyId && options.secretAccessKey && { credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } }),
    } as const;
    this.client = new S3Client({
      ...common,
      // The SDK waits on a silent socket forever by default; an idle one now fails the attempt, and
      // one retry (with the SDK's backoff) bounds a call at about twice the timeout.
      requestHandler: { connectionTimeout: timeoutMs, socketTimeout: timeoutMs },
    });
    this.reader = new S3Client({
      ...common,
      // A socket timeout would also count a paused reader's backpressure as the bucket's silence and
      // cut the download; here the timeout bounds the connection and the answer's head (the request
      // timeout ends when the head arrives), and failWhenStalled the body while it is read.
      requestHandler: { connectionTimeout: timeoutMs, requestTimeout: timeoutMs, throwOnRequestTimeout: true, socketTimeout: 0 },
    });
  }

  async signUpload(key: string, options: SignUploadOptions): Promise<SignedUpload> {
    assertValidKey(key);
    // A conditional write (If-None-Match: *, signed, so it cannot be left out): without it the URL
    // would replace the object for its whole lifetime, after its type, size and sha256 were checked
    // and its text extracted. S3, R2 and MinIO refuse the second PUT with 412.
    const command = new PutObjectCommand({ Bucket: this.options.bucket, Key: key, ContentType: options.contentType, ContentLength: options.sizeBytes, IfNoneMatch: "*" });
    const url = await getSignedUrl(this.client, command, { expiresIn: options.expiresIn, signableHeaders: new Set(["content-type", "content-length", "if-none-match"]) });
    return { url, method: "PUT", headers: { "Content-Type": options.contentType, "If-None-Match": "*" } };
  }

  async signDownload(key: string, options: SignDownloadOptions): Promise<string> {
    assertValidKey(key);
    const command = new GetObjectCommand({
      Bucket: this.options.bucket,
      Key: key,
      ResponseContentType: options.contentType,
      ResponseContentDisposition: contentDisposition(options.inline ? "inline" : "attachment", options.filename),
    });
    return getSignedUrl(this.client, command, { expiresIn: options.expiresIn });
  }

  async head(key: string): Promise<BlobInfo | null> {
    assertValidKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.options.bucket, Key: key }));
      return { size: out.ContentLength ?? 0, contentType: out.ContentType };
    } catch (error) {
      if (isMissing(error)) return null;
      throw unanswered(error);
    }
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    assertValidKey(key);
    const out = await this.reader
      .send(new GetObjectCommand({ Bucket: this.options.bucket, Key: key, ...(range && { Range: `bytes=${range.start}-${range.end}` }) }))
      .catch((error: unknown) => {
        throw isMissing(error) ? new BlobMissing(key) : unanswered(error);
      });
    if (!out.Body) throw new Error(`object ${key} has no body`);
    const body = out.Body instanceof Readable ? out.Body : Readable.fromWeb(out.Body.transformToWebStream() as import("node:stream/web").ReadableStream);
    return failWhenStalled(body, this.timeoutMs, () => storageUnavailable("s3", new Error(`reading ${key} stalled: no bytes for ${this.timeoutMs} ms`)));
  }

  async write(key: string, bytes: Buffer, contentType: string): Promise<void> {
    assertValidKey(key);
    await this.client
      .send(new PutObjectCommand({ Bucket: this.options.bucket, Key: key, Body: bytes, ContentType: contentType, ContentLength: bytes.length }))
      .catch((error: unknown) => {
        throw unanswered(error);
      });
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.options.bucket, Key: key })).catch((error: unknown) => {
      throw unanswered(error);
    });
  }
}

function isMissing(error: unknown): boolean {
  return error instanceof S3ServiceException && (error.$metadata.httpStatusCode === 404 || error.name === "NotFound" || error.name === "NoSuchKey");
}

/** No answer (a timeout, a refused or reset connection) or the service's own 5xx: unavailable; any other error is kept. */
function unanswered(error: unknown): unknown {
  const status = error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
  const noAnswer = !(error instanceof S3ServiceException) && error instanceof Error && (error.name === "TimeoutError" || "code" in error);
  return noAnswer || (status !== undefined && status >= 500) ? storageUnavailable("s3", error) : error;
}

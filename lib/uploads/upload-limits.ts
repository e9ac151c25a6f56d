import { positiveIntEnv } from "@/lib/config.ts";

export const DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/** decisions.md's list, plus DOCX (issue 13 extracts Word files). */
export const ALLOWED_UPLOAD_TYPES = [
  "text/plain",
  "text/markdown",
  "text/csv",
  "text/html",
  "application/json",
  "application/pdf",
  DOCX_TYPE,
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/gif",
] as const;
export type UploadType = (typeof ALLOWED_UPLOAD_TYPES)[number];

export const UPLOAD_PURPOSES = ["memory_attachment"] as const;

/** Seconds a signed upload URL stays valid. */
export const UPLOAD_URL_TTL_SECONDS = 900;
/** Seconds a signed view URL for an inline image stays valid. */
export const VIEW_URL_TTL_SECONDS = 300;
/** Uploads no memory names are deleted after this long. */
export const UNATTACHED_UPLOAD_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * An upload older than this is no longer attached: an hour short of the sweep's cutoff, so an attach
 * can never commit while the sweep is deleting the same bytes (and a detached upload, given the epoch
 * as created_at, can never be attached again).
 */
export const ATTACHABLE_FOR_MS = UNATTACHED_UPLOAD_TTL_MS - 60 * 60 * 1000;

/** The largest upload the database can record: sizes are 32-bit integer columns (2 GiB - 1). */
export const UPLOAD_MAX_BYTES_CEILING = 2 ** 31 - 1;

/**
 * ENGRAM_UPLOAD_MAX_BYTES, default 25 MiB, never past the ceiling: a larger setting let through
 * sizes whose rows could not be written (a 500 after the intent was checked). Start-up refuses
 * such a setting (assertUploadLimit); this keeps requests right if one is read anyway.
 */
export function maxUploadBytes(): number {
  return Math.min(positiveIntEnv("ENGRAM_UPLOAD_MAX_BYTES", 25 * 1024 * 1024), UPLOAD_MAX_BYTES_CEILING);
}

/** Stops start-up on an upload limit the database cannot hold, rather than quietly serving a lower one. */
export function assertUploadLimit(): void {
  const value = positiveIntEnv("ENGRAM_UPLOAD_MAX_BYTES", 25 * 1024 * 1024);
  if (value > UPLOAD_MAX_BYTES_CEILING) {
    throw new Error(`ENGRAM_UPLOAD_MAX_BYTES must be at most ${UPLOAD_MAX_BYTES_CEILING} (2 GiB - 1, the largest file size the database records), got ${value}`);
  }
}

/**
 * ENGRAM_UPLOAD_MAX_PENDING, default 100: uploads one user may have waiting to be attached. Their
 * bytes count toward no quota until a memory attaches them, and each may be the largest upload.
 */
export function maxPendingUploads(): number {
  return positiveIntEnv("ENGRAM_UPLOAD_MAX_PENDING", 100);
}

export function normalizeContentType(value: string): string {
  return value.split(";")[0]!.trim().toLowerCase();
}

export function isAllowedType(type: string): type is UploadType {
  return (ALLOWED_UPLOAD_TYPES as readonly string[]).includes(type);
}

export const isImageType = (type: string) => type.startsWith("image/");

/** Types whose bytes are text in some charset (extraction decodes them; sniffing reads them so). */
export const isTextType = (type: string) => type.startsWith("text/") || type === "application/json";

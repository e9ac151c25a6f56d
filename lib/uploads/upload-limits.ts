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

/** ENGRAM_UPLOAD_MAX_BYTES, default 25 MiB. */
export function maxUploadBytes(): number {
  return positiveIntEnv("ENGRAM_UPLOAD_MAX_BYTES", 25 * 1024 * 1024);
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

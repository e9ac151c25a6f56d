import { createHash, randomBytes, randomUUID } from "node:crypto";
import { z } from "zod";

/** A time-ordered UUID (version 7): 48-bit millisecond timestamp, then randomness. */
export function newId(now = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  return formatUuid(bytes);
}

/**
 * A random UUID (version 4) for records that clients name by a short id prefix: Memax's CLI shows
 * and resolves topics by their first 8 characters, which a time-ordered id shares with every
 * other id made in the same ~65 seconds.
 */
export function newRandomId(): string {
  return randomUUID();
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID_RE.test(value);
}

/**
 * An id as stored: UUIDs are case-insensitive but the database compares their text, so an id in
 * upper case is lowered where it enters (path, X-Hub-ID, query, body). Anything else (a slug, a
 * malformed id) is left as given, for its caller to refuse or not find.
 */
export function normalizeId(value: string): string {
  return isUuid(value) ? value.toLowerCase() : value;
}

/** A body or query field holding a UUID, lowered as normalizeId does. */
export function uuidField(message?: string) {
  return z.uuid(message).overwrite(normalizeId);
}

/**
 * A UUID (version 8, RFC 9562's custom layout) that is a hash of its parts: the same record named
 * the same way always gets the same id, whether or not a row for it exists yet.
 */
export function stableId(...parts: string[]): string {
  const bytes = createHash("sha256").update(parts.join("\0")).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  return formatUuid(bytes);
}

/** 16 bytes with the version set → the canonical 8-4-4-4-12 text, RFC 9562 variant bits set here. */
function formatUuid(bytes: Buffer): string {
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

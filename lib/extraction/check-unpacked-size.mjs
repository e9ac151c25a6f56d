// Plain ESM: the extraction worker (extract-worker.mjs) loads it directly, outside the Next bundle.
import { inflateRawSync } from "node:zlib";

/**
 * What a DOCX may unpack to. The XML of a document long enough to fill a memory's 3 MiB of content
 * is a few tens of MiB; a deflate bomb of a few hundred KiB unpacks to gigabytes, and the parser
 * holds all of it (and an XML tree of it) in memory at once.
 */
export const MAX_UNPACKED_BYTES = 100 * 1024 * 1024;

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/**
 * Why a zip archive must not be unpacked, or null when it may be. Every entry's declared size
 * counts against `limit`, and every deflated entry is inflated here with its declared size as a
 * hard ceiling: a header that under-states an entry cannot smuggle a bomb past the sum.
 */
export function unpackedSizeProblem(bytes, limit = MAX_UNPACKED_BYTES) {
  const end = findEndOfCentralDirectory(bytes);
  if (end < 0) return null; // not a zip: the parser reports that itself
  const entries = bytes.readUInt16LE(end + 10);
  let offset = bytes.readUInt32LE(end + 16);
  // ZIP64 markers: sizes or counts beyond 4 GiB / 65535 entries, never needed by a real document.
  if (entries === 0xffff || offset === 0xffffffff) return tooLarge(limit);
  let total = 0;
  for (let i = 0; i < entries; i++) {
    if (offset + 46 > bytes.length || bytes.readUInt32LE(offset) !== CENTRAL) return null;
    const method = bytes.readUInt16LE(offset + 10);
    const packed = bytes.readUInt32LE(offset + 20);
    const unpacked = bytes.readUInt32LE(offset + 24);
    const local = bytes.readUInt32LE(offset + 42);
    if (packed === 0xffffffff || unpacked === 0xffffffff || local === 0xffffffff) return tooLarge(limit);
    total += unpacked;
    if (total > limit) return tooLarge(limit);
    if (method === 8 && local + 30 <= bytes.length && bytes.readUInt32LE(local) === LOCAL) {
      const start = local + 30 + bytes.readUInt16LE(local + 26) + bytes.readUInt16LE(local + 28);
      try {
        inflateRawSync(bytes.subarray(start, start + packed), { maxOutputLength: Math.max(1, unpacked) });
      } catch (error) {
        if (error.code === "ERR_BUFFER_TOO_LARGE") return "The document's parts are larger than their headers say; it was not unpacked";
        // A corrupt stream is the parser's to report.
      }
    }
    offset += 46 + bytes.readUInt16LE(offset + 28) + bytes.readUInt16LE(offset + 30) + bytes.readUInt16LE(offset + 32);
  }
  return null;
}

function tooLarge(limit) {
  return `The document unpacks to more than ${Math.round(limit / 1024 / 1024)} MiB; it was not read`;
}

function findEndOfCentralDirectory(bytes) {
  // The record is 22 bytes plus a comment of at most 65535.
  for (let i = bytes.length - 22; i >= Math.max(0, bytes.length - 22 - 0xffff); i--) {
    if (bytes.readUInt32LE(i) === EOCD) return i;
  }
  return -1;
}

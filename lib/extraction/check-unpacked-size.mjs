// Plain ESM: the extraction worker (extract-worker.mjs) loads it directly, outside the Next bundle.
import { inflateRawSync } from "node:zlib";

/**
 * What a DOCX may unpack to. The XML of a document long enough to fill a memory's 3 MiB of content
 * is a few tens of MiB; a deflate bomb of a few hundred KiB unpacks to gigabytes, and the parser
 * holds all of it (and an XML tree of it) in memory at once.
 */
export const MAX_UNPACKED_BYTES = 100 * 1024 * 1024;

const EOCD_SIGNATURE = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/**
 * Why a zip archive must not be unpacked, or null when it may be. The archive is read as the
 * parser's unzip (JSZip) reads it, or a file laid out to be read one way here and another there
 * would pass with its bomb: the last end record anywhere in the file, offsets shifted by any bytes
 * before the archive, and every directory entry there is, whatever count the end record gives.
 * Every entry's declared size counts against `limit`, and every deflated entry is inflated here
 * with its declared size as a hard ceiling: a header that under-states an entry cannot smuggle a
 * bomb past the sum.
 */
export function unpackedSizeProblem(bytes, limit = MAX_UNPACKED_BYTES) {
  const end = bytes.lastIndexOf(EOCD_SIGNATURE);
  if (end < 0 || end + 22 > bytes.length) return null; // not a zip the parser can open: it reports that itself
  // ZIP64 markers (any field of the end record at its maximum): the unzip then reads other records
  // for sizes or counts beyond 4 GiB / 65535 entries, never needed by a real document.
  if ([4, 6, 8, 10].some((at) => bytes.readUInt16LE(end + at) === 0xffff) || [12, 16].some((at) => bytes.readUInt32LE(end + at) === 0xffffffff)) {
    return tooLarge(limit);
  }
  const size = bytes.readUInt32LE(end + 12);
  const start = bytes.readUInt32LE(end + 16);
  // Bytes prepended to the archive: the unzip adds them to every offset it reads, and so does this.
  const shift = end - (start + size);
  if (shift < 0) return null; // the unzip refuses it as truncated
  let total = 0;
  let offset = shift + start;
  while (offset + 46 <= bytes.length && bytes.readUInt32LE(offset) === CENTRAL) {
    const method = bytes.readUInt16LE(offset + 10);
    const packed = bytes.readUInt32LE(offset + 20);
    const unpacked = bytes.readUInt32LE(offset + 24);
    const rawLocal = bytes.readUInt32LE(offset + 42);
    if (packed === 0xffffffff || unpacked === 0xffffffff || rawLocal === 0xffffffff) return tooLarge(limit);
    total += unpacked;
    if (total > limit) return tooLarge(limit);
    const local = shift + rawLocal;
    if (method === 8 && local + 30 <= bytes.length && bytes.readUInt32LE(local) === LOCAL) {
      const data = local + 30 + bytes.readUInt16LE(local + 26) + bytes.readUInt16LE(local + 28);
      try {
        inflateRawSync(bytes.subarray(data, data + packed), { maxOutputLength: Math.max(1, unpacked) });
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

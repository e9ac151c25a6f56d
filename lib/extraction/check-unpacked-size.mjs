// Plain ESM: the extraction worker (extract-worker.mjs) loads it directly, outside the Next bundle.
import { inflateRawSync } from "node:zlib";

/**
 * What a DOCX may unpack to. The XML of a document long enough to fill a memory's 3 MiB of content
 * is a few tens of MiB; a deflate bomb of a few hundred KiB unpacks to gigabytes, and the parser
 * holds all of it (and an XML tree of it) in memory at once.
 */
export const MAX_UNPACKED_BYTES = 100 * 1024 * 1024;

/**
 * How deep a DOCX's XML elements may nest. Mammoth's reader and converter recurse once per level (and
 * more per table): a few hundred tables nested in each other (three levels each) overflowed its stack,
 * and the memory ended with "Maximum call stack size exceeded". Real documents, text boxes in tables
 * in tables included, stay within a few dozen levels.
 */
export const MAX_XML_DEPTH = 512;

/** Why a DOCX nested deeper than MAX_XML_DEPTH was not read. */
export const NESTED_TOO_DEEPLY = `The document is nested too deeply to read (more than ${MAX_XML_DEPTH} levels, such as tables within tables); it was not read`;

const EOCD_SIGNATURE = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/**
 * Why a zip archive must not be unpacked, or null when it may be: it unpacks to more than `limit`, or
 * an XML part nests deeper than MAX_XML_DEPTH. The archive is read as the
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
    const nameLength = bytes.readUInt16LE(offset + 28);
    const isXml = /\.(xml|rels)$/i.test(bytes.toString("latin1", offset + 46, offset + 46 + nameLength));
    if ((method === 8 || method === 0) && local + 30 <= bytes.length && bytes.readUInt32LE(local) === LOCAL) {
      const data = local + 30 + bytes.readUInt16LE(local + 26) + bytes.readUInt16LE(local + 28);
      let part = method === 0 ? bytes.subarray(data, data + packed) : null;
      if (method === 8) {
        try {
          part = inflateRawSync(bytes.subarray(data, data + packed), { maxOutputLength: Math.max(1, unpacked) });
        } catch (error) {
          if (error.code === "ERR_BUFFER_TOO_LARGE") return "The document's parts are larger than their headers say; it was not unpacked";
          // A corrupt stream is the parser's to report.
        }
      }
      if (isXml && part && xmlDepthExceeds(part, MAX_XML_DEPTH)) return NESTED_TOO_DEEPLY;
    }
    offset += 46 + bytes.readUInt16LE(offset + 28) + bytes.readUInt16LE(offset + 30) + bytes.readUInt16LE(offset + 32);
  }
  return null;
}

function tooLarge(limit) {
  return `The document unpacks to more than ${Math.round(limit / 1024 / 1024)} MiB; it was not read`;
}

/**
 * Whether the elements of an XML part nest deeper than `max`: one pass over the bytes, no tree and no
 * recursion, skipping comments, CDATA, declarations and quoted attribute values (where a "<" or ">" is
 * text). The parser decodes every part as UTF-8 whatever its first bytes, so those bytes are scanned
 * as they are: a part that merely began like UTF-16 (a stray 0xff byte, a NUL second byte) went
 * unscanned here and overflowed the parser's stack. A part that is UTF-16 is scanned as its
 * characters as well, so it is refused the same way whatever reads it.
 */
export function xmlDepthExceeds(xml, max) {
  if (depthExceeds(xml, max)) return true;
  const units = utf16AsAscii(xml);
  return units !== null && depthExceeds(units, max);
}

/**
 * A UTF-16 part (by its byte-order mark, or "<" as its first character) as one byte per character:
 * the ASCII ones as they are, any other as 0x80. Every character the depth scan looks at is ASCII.
 */
function utf16AsAscii(xml) {
  const bigEndian = (xml[0] === 0xfe && xml[1] === 0xff) || (xml[0] === 0x00 && xml[1] === 0x3c);
  if (!bigEndian && !((xml[0] === 0xff && xml[1] === 0xfe) || (xml[0] === 0x3c && xml[1] === 0x00))) return null;
  const ascii = Buffer.allocUnsafe(xml.length >> 1);
  for (let i = 0; i < ascii.length; i++) {
    const high = xml[bigEndian ? 2 * i : 2 * i + 1];
    const low = xml[bigEndian ? 2 * i + 1 : 2 * i];
    ascii[i] = high === 0 && low < 0x80 ? low : 0x80;
  }
  return ascii;
}

function depthExceeds(xml, max) {
  let depth = 0;
  let at = xml.indexOf(0x3c);
  while (at >= 0) {
    const next = xml[at + 1];
    if (next === 0x00) {
      // UTF-16 read byte by byte: no tag to a UTF-8 parser (the part is scanned as UTF-16 too).
    } else if (next === 0x2f) {
      depth--;
      at = xml.indexOf(0x3e, at);
    } else if (next === 0x3f) {
      at = xml.indexOf("?>", at);
    } else if (next === 0x21) {
      const head = xml.toString("latin1", at, at + 9);
      at = head.startsWith("<!--") ? xml.indexOf("-->", at) : head === "<![CDATA[" ? xml.indexOf("]]>", at) : xml.indexOf(0x3e, at);
    } else {
      let quote = 0;
      let end = at + 1;
      for (; end < xml.length; end++) {
        const byte = xml[end];
        if (quote) {
          if (byte === quote) quote = 0;
        } else if (byte === 0x22 || byte === 0x27) quote = byte;
        else if (byte === 0x3e) break;
      }
      if (end >= xml.length) return false;
      if (xml[end - 1] !== 0x2f && ++depth > max) return true;
      at = end;
    }
    if (at < 0) return false;
    at = xml.indexOf(0x3c, at + 1);
  }
  return false;
}

import { DOCX_TYPE, type UploadType } from "./upload-limits.ts";

export type Sniffed = "application/pdf" | "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "application/zip" | "text" | "binary";

/**
 * What the first bytes of a file really are. Text types can't be told apart by
 * magic numbers (HTML, CSV, JSON, markdown are all text), so they sniff as
 * "text": valid in `encoding` (UTF-8 unless the file's BOM, declared charset or
 * HTML <meta> says otherwise: see textEncoding) without NUL characters.
 */
export function sniffFileType(head: Buffer, encoding = "utf-8"): Sniffed {
  const starts = (...bytes: number[]) => bytes.every((b, i) => head[i] === b);
  if (head.subarray(0, 5).toString("latin1") === "%PDF-") return "application/pdf";
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (head.subarray(0, 4).toString("latin1") === "GIF8") return "image/gif";
  if (head.subarray(0, 4).toString("latin1") === "RIFF" && head.subarray(8, 12).toString("latin1") === "WEBP") return "image/webp";
  if (starts(0x50, 0x4b, 0x03, 0x04)) return "application/zip";
  return looksLikeText(head, encoding) ? "text" : "binary";
}

function looksLikeText(head: Buffer, encoding: string): boolean {
  // Windows-1252 gives every byte a character: only NUL tells binary apart.
  if (encoding === "windows-1252") return !head.includes(0);
  // UTF-16 text is full of 0 bytes, but never of NUL characters.
  if (!encoding.startsWith("utf-16") && head.includes(0)) return false;
  // The sample may end inside a multi-byte character: ignore up to 3 trailing bytes.
  for (let cut = 0; cut <= Math.min(3, head.length); cut++) {
    try {
      return !new TextDecoder(encoding, { fatal: true }).decode(head.subarray(0, head.length - cut)).includes("\0");
    } catch {
      // try a shorter sample
    }
  }
  return false;
}

/** Does what the bytes are fit the declared type? DOCX is a ZIP; every text type is text. */
export function matchesDeclared(declared: UploadType, sniffed: Sniffed): boolean {
  if (declared === DOCX_TYPE) return sniffed === "application/zip";
  if (declared.startsWith("text/") || declared === "application/json") return sniffed === "text";
  return declared === sniffed;
}

/** Width and height from an image header (PNG, GIF, WebP, JPEG); null when unreadable. */
export function imageSize(head: Buffer, type: string): { width: number; height: number } | null {
  try {
    if (type === "image/png" && head.length >= 24 && head.subarray(12, 16).toString("latin1") === "IHDR") {
      const width = head.readUInt32BE(16);
      const height = head.readUInt32BE(20);
      // PNG allows at most 2^31 - 1 either way (and the columns are int4): a header past it is no size at all.
      return width <= 0x7fffffff && height <= 0x7fffffff ? { width, height } : null;
    }
    if (type === "image/gif" && head.length >= 10) return { width: head.readUInt16LE(6), height: head.readUInt16LE(8) };
    if (type === "image/webp" && head.length >= 30) {
      const chunk = head.subarray(12, 16).toString("latin1");
      if (chunk === "VP8X") return { width: 1 + head.readUIntLE(24, 3), height: 1 + head.readUIntLE(27, 3) };
      if (chunk === "VP8 ") return { width: head.readUInt16LE(26) & 0x3fff, height: head.readUInt16LE(28) & 0x3fff };
      if (chunk === "VP8L") {
        const bits = head.readUInt32LE(21);
        return { width: (bits & 0x3fff) + 1, height: ((bits >> 14) & 0x3fff) + 1 };
      }
    }
    if (type === "image/jpeg") {
      let offset = 2;
      while (offset + 9 < head.length) {
        if (head[offset] !== 0xff) return null;
        // Any number of 0xFF fill bytes may precede a marker (T.81 B.1.1.2).
        if (head[offset + 1] === 0xff) {
          offset++;
          continue;
        }
        const marker = head[offset + 1]!;
        if (marker === 0xd9) return null;
        // TEM, RST0..RST7 and SOI are the marker alone: no length follows.
        if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
          offset += 2;
          continue;
        }
        const length = head.readUInt16BE(offset + 2);
        // SOF0..SOF15 except DHT (C4), JPG (C8), DAC (CC) carry the frame size.
        if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) {
          return { width: head.readUInt16BE(offset + 7), height: head.readUInt16BE(offset + 5) };
        }
        offset += 2 + length;
      }
    }
  } catch {
    return null;
  }
  return null;
}

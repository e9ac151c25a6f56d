/**
 * A fetched page's text, decoded the way a browser would (the WHATWG encoding sniffing, simplified):
 * a byte order mark, else the charset of the Content-Type header, else for HTML a <meta> charset (or
 * an XML declaration) near the start, else UTF-8. The BOM comes first as in browsers: it is in the
 * bytes themselves, while a header's charset is often a server-wide default. A label TextDecoder
 * does not know is skipped, as browsers skip it, and the next source decides.
 */
export function decodePage(body: Buffer, contentType: string, html: boolean): string {
  return decodeText(body, textEncoding(body, contentType, html));
}

/**
 * The encoding decodePage reads these bytes in (a TextDecoder name). Uploaded text files are
 * decoded the same way, their declared type taking the place of the header.
 */
export function textEncoding(body: Buffer, contentType: string, html: boolean): string {
  return bomEncoding(body) ?? declaredEncoding(contentType) ?? (html ? known(declaredCharset(body)) : null) ?? "utf-8";
}

/** The encoding a Content-Type's charset names, or null when it names none TextDecoder knows. */
export function declaredEncoding(contentType: string): string | null {
  return known(headerCharset(contentType));
}

export function decodeText(body: Buffer, encoding: string): string {
  if (encoding === "windows-1252") return decodeWindows1252(body);
  // The decoder drops a BOM of its own encoding; a wrong byte becomes U+FFFD rather than an error.
  return new TextDecoder(encoding).decode(body);
}

/** Windows-1252's bytes 0x80-0x9F (curly quotes, dashes, €), by the WHATWG table. */
const CP1252_C1 = "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

/**
 * Node 20.18.3 and later decode windows-1252 (also every "iso-8859-1", "latin1" and "ascii" label,
 * which mean it) as Latin-1 and drop bytes 0x80-0x9F (nodejs/node#56542, #60888). It is the most
 * common legacy charset on the web, so it is decoded here: Latin-1 for the rest, the table for those.
 */
function decodeWindows1252(body: Buffer): string {
  return body.toString("latin1").replace(/[\u0080-\u009f]/g, (c) => CP1252_C1[c.charCodeAt(0) - 0x80]!);
}

function bomEncoding(body: Buffer): string | null {
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return "utf-8";
  if (body[0] === 0xfe && body[1] === 0xff) return "utf-16be";
  if (body[0] === 0xff && body[1] === 0xfe) return "utf-16le";
  return null;
}

function headerCharset(contentType: string): string | null {
  return /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType)?.[1] ?? null;
}

/**
 * The charset a page declares in its first bytes. Browsers look at 1024 bytes; pages with a long
 * <head> (inline styles, many <link>s) put theirs later, so a little more is read here.
 */
const DECLARATION_WINDOW = 4096;

function declaredCharset(body: Buffer): string | null {
  // Latin-1 maps every byte to one character, so ASCII markup reads the same in any encoding a page may use.
  const head = body.subarray(0, DECLARATION_WINDOW).toString("latin1").replace(/<!--[^]*?-->/g, "");
  const declared =
    /<meta\b[^>]*?\bcharset\s*=\s*["']?\s*([^"'\s;/>]+)/i.exec(head)?.[1] ?? /^\s*<\?xml\b[^>]*\bencoding\s*=\s*["']([^"']+)/i.exec(head)?.[1];
  if (!declared) return null;
  // A page that reached here without a BOM is not UTF-16 whatever it says (the spec's rule: UTF-8).
  return /^utf-16/i.test(declared) ? "utf-8" : declared;
}

function known(label: string | null): string | null {
  if (!label) return null;
  try {
    const { encoding } = new TextDecoder(label);
    // "replacement" (ISO-2022-KR and the like) would decode the whole page to one U+FFFD.
    return encoding === "replacement" ? null : encoding;
  } catch {
    return null;
  }
}

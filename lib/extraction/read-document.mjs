// The text of a PDF, DOCX, HTML or text file. Plain ESM: the extraction worker (extract-worker.mjs)
// loads it directly, outside the Next bundle; lib/extraction/extract-text.ts says which kind a file is.
import { NESTED_TOO_DEEPLY, unpackedSizeProblem } from "./check-unpacked-size.mjs";
import { fragmentToMarkdown, htmlToMarkdown } from "./html-to-markdown.mjs";

/**
 * Pages read from one PDF. A book's worth of text fills a memory's 3 MiB of content long before
 * this; a crafted file of tiny pages (a few dozen bytes each) would otherwise make the parser
 * load hundreds of thousands of pages, all at once.
 */
export const MAX_PDF_PAGES = 2000;

/** The parsers, loaded ahead of the first file so that a file's time limit is not spent loading them. */
export async function loadParsers() {
  await Promise.all([import("unpdf"), import("mammoth")]);
}

export async function readDocument(kind, bytes, { maxContentBytes }) {
  if (kind === "pdf") return readPdf(bytes, maxContentBytes);
  if (kind === "docx") {
    const problem = unpackedSizeProblem(bytes);
    if (problem) return { text: "", error: problem };
    const mammoth = await import("mammoth");
    // Mammoth's default inlines every picture as a base64 data URI: megabytes of it would fill the
    // content (clipped at 3 MiB, cutting off the text after it) and its chunks. Mammoth still adds the alt text.
    const noPictures = mammoth.images.imgElement(async () => ({ src: "" }));
    let result;
    try {
      result = await mammoth.convertToHtml({ buffer: bytes }, { convertImage: noPictures });
    } catch (error) {
      // The depth check above reads the parts named .xml and .rels; the parser reads whatever part the
      // package's relationships name, so a deep one under another name still overflowed its stack.
      if (error instanceof RangeError && /call stack/i.test(error.message)) return { text: "", error: NESTED_TOO_DEEPLY };
      throw error;
    }
    const text = fragmentToMarkdown(result.value);
    return text ? clipText(text, maxContentBytes) : { text: "", error: "No text was found in the document" };
  }
  if (kind === "html") {
    const doc = htmlToMarkdown(bytes.toString("utf8"));
    return doc.markdown ? { ...clipText(doc.markdown, maxContentBytes), title: doc.title || undefined } : { text: "", error: "No readable text was found in the page" };
  }
  const text = bytes.toString("utf8").replace(/^\uFEFF/, "").trim();
  // Cut here (as every kind's text is), not after the reply: a 25 MiB text file was otherwise posted
  // back whole (a copy the main thread held) only to keep its first 3 MiB.
  return text ? clipText(text, maxContentBytes) : { text: "", error: "The file is empty" };
}

/** At most `maxBytes` of UTF-8, cut between characters; `clipped` tells the caller to say so. */
function clipText(text, maxBytes) {
  if (Buffer.byteLength(text, "utf8") <= maxBytes) return { text };
  // encodeInto writes only whole characters (a surrogate pair too): the cut never splits one.
  const out = new Uint8Array(maxBytes);
  const { written } = new TextEncoder().encodeInto(text, out);
  return { text: Buffer.from(out.buffer, 0, written).toString("utf8"), clipped: true };
}

async function readPdf(bytes, maxContentBytes) {
  const { getDocumentProxy } = await import("unpdf");
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  try {
    const totalPages = pdf.numPages;
    const pages = [];
    let read = 0;
    let size = 0;
    // One page at a time, and no further once the text would be clipped anyway.
    while (read < Math.min(totalPages, MAX_PDF_PAGES) && size <= maxContentBytes) {
      const page = await pdf.getPage(++read);
      const content = await page.getTextContent();
      page.cleanup();
      const raw = content.items.map((item) => ("str" in item ? item.str + (item.hasEOL ? "\n" : "") : "")).join("");
      // One section per page: a chunk's heading_chain then says which page it came from.
      const text = raw.replace(/[ \t]+\n/g, "\n").trim();
      if (text) pages.push({ n: read, text });
      size += Buffer.byteLength(text, "utf8");
    }
    if (!pages.length) return { text: "", error: `No text was found in the PDF (${totalPages} pages; scanned pages need OCR)` };
    const body = pages.map((page) => `## Page ${page.n}\n\n${page.text}`).join("\n\n");
    const problems = [
      read - pages.length > 0 && `${read - pages.length} of ${read} pages had no text`,
      read < totalPages && `only the first ${read} of ${totalPages} pages were read`,
    ].filter(Boolean);
    return problems.length ? { text: body, error: problems.join("; ").replace(/^./, (c) => c.toUpperCase()) } : { text: body };
  } finally {
    await pdf.destroy();
  }
}

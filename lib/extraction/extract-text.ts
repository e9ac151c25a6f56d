import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { DOCX_TYPE, isImageType } from "@/lib/uploads/upload-limits.ts";
import { unpackedSizeProblem } from "./check-unpacked-size.ts";
import { fragmentToMarkdown, htmlToMarkdown } from "./html-to-markdown.ts";

export interface Extracted {
  /** Markdown or plain text; "" when nothing readable was found. */
  text: string;
  /** A title the document gives itself (HTML <title>, Readability), if any. */
  title?: string;
  /** Why part or all of the file could not be read; becomes processing_error. */
  error?: string;
}

/**
 * The text of a file, by its (verified) type: PDF per page, DOCX as markdown
 * with its headings, HTML through Readability, text types as they are.
 * Images have no text here (see describe-image.ts).
 */
export async function extractText(bytes: Buffer, contentType: string): Promise<Extracted> {
  if (contentType === "application/pdf") return extractPdf(bytes);
  if (contentType === DOCX_TYPE) {
    const problem = unpackedSizeProblem(bytes);
    if (problem) return { text: "", error: problem };
    const mammoth = await import("mammoth");
    // Mammoth's default inlines every picture as a base64 data URI: megabytes of it would fill the
    // content (clipped at 3 MiB, cutting off the text after it) and its chunks. Mammoth still adds the alt text.
    const noPictures = mammoth.images.imgElement(async () => ({ src: "" }));
    const result = await mammoth.convertToHtml({ buffer: bytes }, { convertImage: noPictures });
    const text = fragmentToMarkdown(result.value);
    return text ? { text } : { text: "", error: "No text was found in the document" };
  }
  if (contentType === "text/html") {
    const doc = htmlToMarkdown(bytes.toString("utf8"));
    return doc.markdown ? { text: doc.markdown, title: doc.title || undefined } : { text: "", error: "No readable text was found in the page" };
  }
  if (isImageType(contentType)) return { text: "", error: "No text was found in the image (no vision model is configured)" };
  const text = bytes.toString("utf8").replace(/^\uFEFF/, "").trim();
  return text ? { text } : { text: "", error: "The file is empty" };
}

/**
 * Pages read from one PDF. A book's worth of text fills a memory's 3 MiB of content long before
 * this; a crafted file of tiny pages (a few dozen bytes each) would otherwise make the parser
 * load hundreds of thousands of pages, all at once.
 */
export const MAX_PDF_PAGES = 2000;

async function extractPdf(bytes: Buffer): Promise<Extracted> {
  const { getDocumentProxy } = await import("unpdf");
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  try {
    const totalPages = pdf.numPages;
    const pages: { n: number; text: string }[] = [];
    let read = 0;
    let size = 0;
    // One page at a time, and no further once the text would be clipped anyway.
    while (read < Math.min(totalPages, MAX_PDF_PAGES) && size <= MAX_CONTENT_BYTES) {
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

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

async function extractPdf(bytes: Buffer): Promise<Extracted> {
  const { extractText: pdfText, getDocumentProxy } = await import("unpdf");
  const pdf = await getDocumentProxy(new Uint8Array(bytes));
  try {
    const { totalPages, text } = await pdfText(pdf, { mergePages: false });
    // One section per page: a chunk's heading_chain then says which page it came from.
    const pages = text.map((page, i) => ({ n: i + 1, text: page.replace(/[ \t]+\n/g, "\n").trim() })).filter((page) => page.text);
    if (!pages.length) return { text: "", error: `No text was found in the PDF (${totalPages} pages; scanned pages need OCR)` };
    const body = pages.map((page) => `## Page ${page.n}\n\n${page.text}`).join("\n\n");
    const missing = totalPages - pages.length;
    return missing > 0 ? { text: body, error: `${missing} of ${totalPages} pages had no text` } : { text: body };
  } finally {
    await pdf.destroy();
  }
}

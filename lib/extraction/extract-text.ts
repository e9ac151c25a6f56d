import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { DOCX_TYPE, isImageType } from "@/lib/uploads/upload-limits.ts";
import { readDocumentInThread } from "./extraction-thread.ts";
import type { DocumentKind } from "./read-document.mjs";

export interface Extracted {
  /** Markdown or plain text; "" when nothing readable was found. */
  text: string;
  /** A title the document gives itself (HTML <title>, Readability), if any. */
  title?: string;
  /** Why part or all of the file could not be read; becomes processing_error. */
  error?: string;
  /** Cut to what a memory holds by the reader (a text file): said in processing_error. */
  clipped?: boolean;
}

/**
 * The text of a file, by its (verified) type: PDF per page, DOCX as markdown
 * with its headings, HTML through Readability, text types as they are.
 * Images have no text here (see describe-image.ts). Parsing runs in the
 * extraction thread, under its time and memory limits (extraction-thread.ts);
 * a file stopped at a limit rejects with ExtractionStoppedError. A `signal` that aborts while the file
 * waits for the thread rejects with its reason.
 */
export async function extractText(bytes: Buffer, contentType: string, signal?: AbortSignal): Promise<Extracted> {
  if (isImageType(contentType)) return { text: "", error: "No text was found in the image (no vision model is configured)" };
  return readDocumentInThread(documentKind(contentType), bytes, MAX_CONTENT_BYTES, signal);
}

function documentKind(contentType: string): DocumentKind {
  if (contentType === "application/pdf") return "pdf";
  if (contentType === DOCX_TYPE) return "docx";
  if (contentType === "text/html") return "html";
  return "text";
}

// Types of lib/extraction/read-document.mjs (plain ESM, loaded by the extraction worker).
export type DocumentKind = "pdf" | "docx" | "html" | "text";

export interface ReadDocument {
  /** Markdown or plain text; "" when nothing readable was found. */
  text: string;
  /** A title the document gives itself (HTML <title>, Readability), if any. */
  title?: string;
  /** Why part or all of the file could not be read; becomes processing_error. */
  error?: string;
  /** The text was cut to the maxContentBytes a memory holds. */
  clipped?: boolean;
}

export const MAX_PDF_PAGES: number;

export function loadParsers(): Promise<void>;

export function readDocument(kind: DocumentKind, bytes: Buffer, limits: { maxContentBytes: number }): Promise<ReadDocument>;

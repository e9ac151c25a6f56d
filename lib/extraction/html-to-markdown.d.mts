// Types of lib/extraction/html-to-markdown.mjs (plain ESM, loaded by the extraction worker).
export interface ReadableDocument {
  title: string;
  markdown: string;
}

/** HTML to markdown: the readable article when Readability finds one, else the whole body. */
export function htmlToMarkdown(html: string): ReadableDocument;

/** Word's HTML (mammoth) to markdown: headings stay headings, a picture leaves its alt text. */
export function fragmentToMarkdown(html: string): string;

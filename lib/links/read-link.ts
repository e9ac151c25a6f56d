import { extractText, type Extracted } from "@/lib/extraction/extract-text.ts";
import { ExtractionWorkerError, readPageInThread } from "@/lib/extraction/extraction-thread.ts";
import { normalizeContentType } from "@/lib/uploads/upload-limits.ts";
import { decodePage } from "./decode-page.ts";
import { LinkFetchError, safeFetch } from "./safe-fetch.ts";

/**
 * A link memory's page as readable markdown, titled from the page. Failures
 * (refused, unreachable, not text, over a reading limit) come back as
 * `error`: the memory then keeps its URL as content and says why. Only a
 * reader that died is thrown, so that the job is retried. So is `signal`'s abort (the job's lease was
 * lost): the page was not found unreadable, and the memory's new owner reads it.
 */
export async function readLink(url: string, { signal }: { signal?: AbortSignal } = {}): Promise<Extracted> {
  try {
    const page = await safeFetch(url, undefined, { signal });
    const type = normalizeContentType(page.contentType) || "text/html";
    if (type === "text/html" || type === "application/xhtml+xml") {
      // The readers take UTF-8: a page in another charset is decoded here, where its header is known.
      const doc = await readPageInThread(Buffer.from(decodePage(page.body, page.contentType, true), "utf8"), signal);
      if (!doc.markdown) return { text: "", title: doc.title || undefined, error: "No readable text was found on the page" };
      return { text: doc.markdown, title: doc.title || undefined };
    }
    // Awaited here: returned as they are, their rejections (a reading limit) escaped the catch below and were retried.
    if (type.startsWith("text/")) return await extractText(Buffer.from(decodePage(page.body, page.contentType, false), "utf8"), "text/plain", signal);
    if (type === "application/pdf" || type === "application/json") {
      return await extractText(page.body, type, signal);
    }
    return { text: "", error: `The link serves ${type}, which has no readable text` };
  } catch (error) {
    if (signal?.aborted) throw error;
    if (error instanceof LinkFetchError) return { text: "", error: error.message };
    // The reader died (not the page's fault): the job is retried rather than the page recorded as unreadable.
    if (error instanceof ExtractionWorkerError) throw error;
    return { text: "", error: `The page could not be read: ${(error as Error).message}` };
  }
}

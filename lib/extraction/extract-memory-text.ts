import { createHash } from "node:crypto";
import type { Readable } from "node:stream";
import { APICallError, generateText, RetryError } from "ai";
import { chatModel } from "@/lib/ai/chat-model.ts";
import { modelTimeoutMs } from "@/lib/ai/model-timeout.ts";
import { blobStore } from "@/lib/blobs/blob-store.ts";
import type { Memory } from "@/lib/db/generated/client.ts";
import { decodePage } from "@/lib/links/decode-page.ts";
import { readLink } from "@/lib/links/read-link.ts";
import { MAX_CONTENT_BYTES } from "@/lib/memories/memory-fields.ts";
import { describeError, isPermanentError } from "@/lib/processing/process-memory.ts";
import { isImageType, isTextType } from "@/lib/uploads/upload-limits.ts";
import { extractText, type Extracted } from "./extract-text.ts";
import { extractionLimits, ExtractionWorkerError } from "./extraction-thread.ts";

interface StoredFileRef {
  object_key: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  /** The charset the upload declared (text files). */
  charset?: string;
}

/** Does this memory wait for extraction (a file or a link not read yet)? */
export function needsExtraction(memory: Pick<Memory, "fileRef" | "contentType" | "extractedAt">): boolean {
  return memory.extractedAt === null && (memory.fileRef !== null || memory.contentType === "link");
}

/**
 * The text a file or link memory is indexed by. A file's note (the content it
 * was created with) comes first, then the file's text; a link's content
 * becomes the page. Whatever could not be read is reported in `error`.
 */
export async function extractMemoryText(memory: Memory, options: { signal?: AbortSignal } = {}): Promise<{ content: string; title?: string; error: string | null }> {
  if (memory.fileRef === null) {
    // The same URL pushed again reads link_url, its content still the page read last time: kept when the
    // page cannot be read now. Only while the content_hash is still that URL's: other content written
    // since (a PATCH, a push of text) is what the memory is now.
    const again = memory.linkUrl !== null && createHash("sha256").update(memory.linkUrl, "utf8").digest("hex") === memory.contentHash;
    // Fetched outside the documents' one-at-a-time turn (only the parse uses the reader's thread): in it, 50 pushed links
    // were fetched one after another (up to 10 s each) and every document waited behind them. A page held
    // while it waits for the parse is at most 5 MiB, one per running job. A job whose lease is lost stops
    // the fetch at once: it otherwise ran on to its 10 s limit for a page no one would take.
    const page = await readLink((again ? memory.linkUrl! : memory.content).trim(), { signal: options.signal });
    // Lost while the parse ran (the fetch had ended): the page is not ours to record.
    if (options.signal?.aborted) throw abortReason(options.signal);
    const kept = page.text ? clip(page.text) : memory.content;
    const clipped = page.text && (page.clipped || kept.length < page.text.length) ? longerThanAMemory("page") : null;
    return { content: kept, title: page.title, error: [page.error, clipped].filter(Boolean).join(". ") || null };
  }
  const ref = memory.fileRef as unknown as StoredFileRef;
  // Documents wait for the reader's one thread before their bytes are fetched: the runner works on
  // many memories at once, and each waiting job held its whole file (and the reader's copy) meanwhile.
  // Images take turns of their own, at the vision model (a document need not wait for the model),
  // IMAGE_READS_AT_ONCE of them: each image job otherwise fetched its file at once and held it while the
  // model read the others. A job whose lease is lost (options.signal) while it waits for its turn leaves at once.
  return inTurn(isImageType(ref.content_type) ? "image" : "document", () => readFileMemory(memory, ref, options.signal), options.signal);
}

/**
 * Images read from storage and by the vision model at once, per process. One at a time, 40 photos took a
 * model call each (up to ENGRAM_MODEL_TIMEOUT_MS) in a row; three keep the bytes held at once small
 * (three files of at most ENGRAM_EXTRACT_MAX_BYTES) and the model's answers coming. The embedded runner
 * starts no more image jobs than this (embedded-runner.ts), so the others do not wait in its workers.
 */
export const IMAGE_READS_AT_ONCE = 3;

export type ReadTurn = "image" | "document";

/**
 * The read turn this memory's extraction waits for: an image's or a document's (any other file not read
 * yet), or null (nothing to read, or a link: only its parse uses the reader's thread, briefly).
 */
export function readTurnOf(memory: Pick<Memory, "fileRef" | "contentType" | "extractedAt">): ReadTurn | null {
  if (!needsExtraction(memory) || memory.fileRef === null) return null;
  return isImageType((memory.fileRef as unknown as Partial<StoredFileRef>).content_type ?? "") ? "image" : "document";
}

async function readFileMemory(memory: Memory, ref: StoredFileRef, signal?: AbortSignal): Promise<{ content: string; title?: string; error: string | null }> {
  const note = memory.content.trim();
  const { maxBytes, timeoutMs, downloadMaxMs } = extractionLimits();
  const read = await readFile(ref.object_key, maxBytes, { idleMs: timeoutMs, deadlineMs: downloadMaxMs, signal });
  // Gone for good (removed from storage by hand, or a lost bucket): retrying cannot bring it back.
  if (!read) return { content: note || ref.filename, error: "The file is no longer in storage; only the note was indexed" };
  // A PDF, DOCX or image cut short is no such file (their indexes sit at the end): past the limit only
  // text is read, its first part.
  if (read.truncated && !isTextType(ref.content_type)) {
    return { content: note || ref.filename, error: `The file is larger than the ${formatBytes(maxBytes)} read for text; only the note was indexed` };
  }
  const bytes = read.bytes;
  // Lost while the bytes came (the download stops then, but may have just ended): the parse is not ours to do.
  if (signal?.aborted) throw abortReason(signal);
  // A file the parser chokes on, or that hits a time or memory limit (ExtractionStoppedError), will do
  // the same on a retry: report it, index what there is. A reader that died is not the file's fault:
  // that is thrown, and the job retried.
  const extracted = await (isImageType(ref.content_type) ? describeImage(bytes, ref, memory.hint, signal) : extractText(asUtf8(bytes, ref), ref.content_type, signal)).catch(
    (error: Error): Extracted => {
      // Given up (the lease was lost) while it waited for the reader or the model: not the file's fault.
      if (signal?.aborted) throw abortReason(signal);
      if (error instanceof ExtractionWorkerError) throw error;
      // The vision model failed. Busy, unreachable, silent or erring (429, 5xx) says nothing of the image: retried.
      // A refusal is final, in describeError's words (the provider's own may echo the key or name hosts).
      if (APICallError.isInstance(error) || RetryError.isInstance(error) || error.name === "TimeoutError" || error.name === "AbortError") {
        if (!isPermanentError(error)) throw error;
        return { text: "", error: `The file could not be read: ${describeError(error)}`.slice(0, 500) };
      }
      return { text: "", error: `The file could not be read: ${error.message}`.slice(0, 500) };
    },
  );
  const text = extracted.text || (isImageType(ref.content_type) ? [`# ${ref.filename}`, memory.hint ?? ""].filter(Boolean).join("\n\n") : "");
  const content = [note, text].filter(Boolean).join("\n\n") || ref.filename;
  const truncation = read.truncated ? `The file is larger than the ${formatBytes(maxBytes)} read for text; only its first ${formatBytes(maxBytes)} were read` : null;
  const kept = clip(content);
  // A text cut to what a memory holds is no more complete than one cut at the read limit: said the same way.
  const clipped = extracted.clipped || kept.length < content.length ? longerThanAMemory("file") : null;
  return { content: kept, title: extracted.title, error: [truncation, clipped, extracted.error].filter(Boolean).join(". ") || null };
}

interface Turns {
  running: number;
  waiting: (() => void)[];
}

// One per process, also when several route bundles include this module (as the reader's thread is).
const globalForTurns = globalThis as unknown as { __engramReadTurns?: Record<"document" | "image", Turns> };

/**
 * Runs `read` once fewer reads of its kind are in progress than its kind allows (documents one, images
 * IMAGE_READS_AT_ONCE), in the order they came, whatever the outcome of those before. A `signal` that
 * aborts answers the caller at once (its rejection): while it waits, its read is skipped; once started,
 * the turn is still held until that read ends.
 */
function inTurn<T>(kind: "document" | "image", read: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const turns = (globalForTurns.__engramReadTurns ??= { document: { running: 0, waiting: [] }, image: { running: 0, waiting: [] } })[kind];
  const limit = kind === "image" ? IMAGE_READS_AT_ONCE : 1;
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const start = () => {
      turns.running++;
      read()
        .then(resolve, reject)
        .finally(() => {
          signal?.removeEventListener("abort", leave);
          turns.running--;
          turns.waiting.shift()?.();
        });
    };
    const leave = () => {
      const waiting = turns.waiting.indexOf(start);
      if (waiting >= 0) turns.waiting.splice(waiting, 1);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", leave, { once: true });
    if (turns.running < limit) start();
    else turns.waiting.push(start);
  });
}

const abortReason = (signal: AbortSignal) => (signal.reason instanceof Error ? signal.reason : new Error("the job was stopped"));

/** The storage download stalled (or trickled past its cap): not the file's fault, so the job is retried later. */
class StorageTooSlow extends Error {}

/**
 * Settles with `work`, or rejects once `signal` aborts (calling `stop` so that the work in flight ends
 * too): a store that never answers (a head or a first chunk that never comes) cannot hold the turn.
 * The rejection is `lease`'s reason when the job's lease was lost, else StorageTooSlow with `signal`'s.
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal, stop: () => void, lease?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      stop();
      reject(lease?.aborted ? abortReason(lease) : new StorageTooSlow(`The file could not be read from storage in time: ${String(signal.reason)}`));
    };
    if (signal.aborted) abort();
    signal.addEventListener("abort", abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

/**
 * How long a download that keeps making progress may take in all: ten times the idle limit, plus a
 * second per 64 KiB asked for, and never past `deadlineMs` (ENGRAM_EXTRACT_DOWNLOAD_MAX_MS). Without that
 * deadline 25 MiB at the default 30 s came to about 12 minutes, all of it in the documents' one turn.
 */
function downloadCapMs(idleMs: number, bytes: number, deadlineMs: number): number {
  return Math.min(deadlineMs, 10 * idleMs + Math.ceil(bytes / (64 * 1024)) * 1000);
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

/**
 * The stored bytes, at most `maxBytes` of them (`truncated` when there are more), or null when the
 * object is missing. Other storage failures are retried; their message (a local store's names the
 * server's directories) goes to the log, not to processing_error, which every member of the hub sees.
 * The download holds the process's turn for its kind, so a store that stops sending cannot keep it:
 * past `idleMs` (ENGRAM_EXTRACT_TIMEOUT_MS) with no answer to the head and no new bytes the job is
 * retried later. A slow store that keeps sending is waited for up to `deadlineMs` (ENGRAM_EXTRACT_DOWNLOAD_MAX_MS,
 * 120 s by default, counted from the start, the head included), or up to downloadCapMs when that is shorter
 * (only with the idle limit lowered or the deadline raised: at the defaults the deadline always comes first).
 * A deadline of the same 30 s as parsing failed every attempt of a 25 MiB file on a store serving under
 * 0.85 MB/s. A job whose lease is lost (`signal`: taken over, the memory deleted or rewritten)
 * stops the download at once, with the signal's reason, instead of holding the turn for a result no one takes.
 */
async function readFile(
  key: string,
  maxBytes: number,
  { idleMs, deadlineMs, signal }: { idleMs: number; deadlineMs: number; signal?: AbortSignal },
): Promise<{ bytes: Buffer; truncated: boolean } | null> {
  if (signal?.aborted) throw abortReason(signal);
  const store = await blobStore();
  const stuck = new AbortController();
  let idle: NodeJS.Timeout | undefined;
  const tooLong = () => stuck.abort(`its download took longer than ${seconds(deadlineMs)}`);
  // From the start: the head counts towards the deadline too.
  const startedAt = Date.now();
  let cap: NodeJS.Timeout | undefined = setTimeout(tooLong, deadlineMs);
  const progressed = () => {
    clearTimeout(idle);
    idle = setTimeout(() => stuck.abort(`no new bytes for ${seconds(idleMs)}`), idleMs);
  };
  const lost = () => stuck.abort("the job's lease was lost");
  signal?.addEventListener("abort", lost, { once: true });
  // Lost while the store was looked up (the check above came before that wait, the listener after it).
  if (signal?.aborted) {
    clearTimeout(cap);
    signal.removeEventListener("abort", lost);
    throw abortReason(signal);
  }
  progressed();
  let stream: Readable | undefined;
  try {
    return await untilAborted(
      (async () => {
        // One byte past the limit says whether there is more, without reading it. A range past the end is
        // not asked for: an empty object has none to give.
        const info = await store.head(key);
        progressed();
        if (info?.size === 0) return { bytes: Buffer.alloc(0), truncated: false };
        const asked = info ? Math.min(info.size, maxBytes + 1) : maxBytes + 1;
        const capMs = downloadCapMs(idleMs, asked, deadlineMs);
        // Armed once the head answers, so never past what is left of the deadline: the head's wait is spent.
        const leftMs = deadlineMs - (Date.now() - startedAt);
        if (capMs < leftMs) {
          clearTimeout(cap);
          cap = setTimeout(() => stuck.abort(`not whole within ${seconds(capMs)}`), capMs);
        }
        stream = await store.read(key, { start: 0, end: asked - 1 });
        progressed();
        if (stuck.signal.aborted) stream.destroy();
        const parts: Buffer[] = [];
        let length = 0;
        for await (const part of stream) {
          progressed();
          parts.push(Buffer.from(part as Uint8Array));
          length += (part as Uint8Array).length;
          if (length > maxBytes) break;
        }
        const bytes = Buffer.concat(parts);
        return { bytes: bytes.subarray(0, maxBytes), truncated: bytes.length > maxBytes };
      })(),
      stuck.signal,
      () => stream?.destroy(),
      signal,
    );
  } catch (error) {
    if (signal?.aborted) throw abortReason(signal);
    if (error instanceof StorageTooSlow) {
      console.error(`[engram] processing: object ${key} did not arrive from storage (${String(stuck.signal.reason)}); retried later`);
      throw error;
    }
    // Under the same limits: this look holds the turn too.
    progressed();
    const missing = await untilAborted(store.head(key), stuck.signal, () => undefined).then((info) => info === null, () => false);
    if (missing) return null;
    console.error(`[engram] processing: could not read object ${key}`, error);
    throw new Error("The file could not be read from storage");
  } finally {
    signal?.removeEventListener("abort", lost);
    clearTimeout(idle);
    clearTimeout(cap);
  }
}

/**
 * The readers take UTF-8: a text file is decoded as a fetched page is, by its BOM, else the charset
 * its upload declared, else (HTML) its <meta> charset, else as UTF-8.
 */
function asUtf8(bytes: Buffer, ref: StoredFileRef): Buffer {
  if (!isTextType(ref.content_type)) return bytes;
  const declared = ref.charset ? `${ref.content_type}; charset=${ref.charset}` : ref.content_type;
  return Buffer.from(decodePage(bytes, declared, ref.content_type === "text/html"), "utf8");
}

/** The chat model's reading of an image when one is configured; otherwise no text. */
async function describeImage(bytes: Buffer, ref: StoredFileRef, hint: string | null, signal?: AbortSignal): Promise<Extracted> {
  const model = chatModel();
  if (!model) return { text: "", error: "No text was found in the image (no vision model is configured)" };
  const { text } = await generateText({
    model,
    // Bounded like every background model call (model-timeout.ts): the runner renews a job's lease on a
    // timer, so a provider that never answers would otherwise hold the memory `running` for good.
    maxRetries: 1,
    // The job's lease too: a job given up (its caller already answered) otherwise held the image turn,
    // and every image behind it, until the model's timeout.
    abortSignal: signal ? AbortSignal.any([signal, AbortSignal.timeout(modelTimeoutMs())]) : AbortSignal.timeout(modelTimeoutMs()),
    messages: [
      {
        role: "user",
        content: [
          {
            type: "text",
            text: `Transcribe any text in this image, then describe what it shows in a few sentences, for search. File: ${ref.filename}.${hint ? ` Note: ${hint}` : ""}`,
          },
          { type: "image", image: bytes, mediaType: ref.content_type },
        ],
      },
    ],
  });
  return text.trim() ? { text: `# ${ref.filename}\n\n${text.trim()}` } : { text: "", error: "No text was found in the image" };
}

const longerThanAMemory = (what: "file" | "page") =>
  `The ${what}'s text is longer than the ${formatBytes(MAX_CONTENT_BYTES)} a memory holds; only its first ${formatBytes(MAX_CONTENT_BYTES)} were kept`;

function formatBytes(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/** Extracted text is bounded like pushed content. */
function clip(text: string): string {
  if (Buffer.byteLength(text, "utf8") <= MAX_CONTENT_BYTES) return text;
  return Buffer.from(text, "utf8").subarray(0, MAX_CONTENT_BYTES).toString("utf8").replace(/\uFFFD$/, "");
}

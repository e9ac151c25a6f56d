import { existsSync } from "node:fs";
import path from "node:path";
import { positiveIntEnv } from "@/lib/config.ts";
import { WorkerLane, type WorkerReply } from "@/lib/worker-lane.ts";
import { htmlToMarkdown, type ReadableDocument } from "./html-to-markdown.mjs";
import { readDocument, type DocumentKind, type ReadDocument } from "./read-document.mjs";

/**
 * Time limit of one file or page, the memory its reading may use, and how much of a stored file is
 * read at all (documented in docs/files.md). The last bounds what extraction holds in memory: the
 * upload limit may be raised to 2 GiB, and a file is read whole into a buffer and copied to the thread.
 */
export function extractionLimits(): { timeoutMs: number; memoryMb: number; maxBytes: number; downloadMaxMs: number } {
  return {
    // The documents' one turn covers the file's download: a store that keeps trickling cannot hold it longer.
    downloadMaxMs: positiveIntEnv("ENGRAM_EXTRACT_DOWNLOAD_MAX_MS", 120_000),
    timeoutMs: positiveIntEnv("ENGRAM_EXTRACT_TIMEOUT_MS", 30_000),
    memoryMb: positiveIntEnv("ENGRAM_EXTRACT_MEMORY_MB", 512),
    maxBytes: positiveIntEnv("ENGRAM_EXTRACT_MAX_BYTES", 25 * 1024 * 1024),
  };
}

/**
 * Reading was stopped at a limit. The message is shown in processing_error after "The file could not
 * be read: " (or "The page …"), so it names the limit and nothing of the server.
 */
export class ExtractionStoppedError extends Error {}

/**
 * The reader itself failed: its thread did not start or died mid-task (a crash, or terminated from
 * outside). Unlike ExtractionStoppedError the file is not at fault, so the job is retried like any
 * transient failure instead of recording the file as unreadable for good.
 */
export class ExtractionWorkerError extends Error {}

/** The worker script (plain ESM, loaded by Node outside the Next bundle), or null when it is not there. */
export function extractWorkerScript(): string | null {
  const script = path.join(process.cwd(), "lib", "extraction", "extract-worker.mjs");
  return existsSync(script) ? script : null;
}

type Task = { task: "document"; kind: DocumentKind; bytes: Buffer; maxContentBytes: number } | { task: "page"; bytes: Buffer };

/**
 * A file's text, read in the extraction thread. A `signal` that aborts (a job whose lease was lost)
 * rejects with its reason at once, and a parse already under way is stopped with the thread (worker-lane.ts).
 */
export function readDocumentInThread(kind: DocumentKind, bytes: Buffer, maxContentBytes: number, signal?: AbortSignal): Promise<ReadDocument> {
  return run({ task: "document", kind, bytes, maxContentBytes }, signal) as Promise<ReadDocument>;
}

/** A fetched HTML page as markdown, read in the extraction thread; `signal` as for readDocumentInThread. */
export function readPageInThread(html: Buffer, signal?: AbortSignal): Promise<ReadableDocument> {
  return run({ task: "page", bytes: html }, signal) as Promise<ReadableDocument>;
}

interface Reply extends WorkerReply {
  result?: unknown;
}

/** The extraction worker: reading files and pages under the time and memory limits above. */
function extractionLane(script: string): WorkerLane<Reply> {
  return new WorkerLane<Reply>({
    script,
    workerOptions: () => ({ resourceLimits: { maxOldGenerationSizeMb: extractionLimits().memoryMb } }),
    timeoutMs: () => extractionLimits().timeoutMs,
    timedOut: (ms) => new ExtractionStoppedError(`it took longer than ${ms / 1000} s to read and was stopped`),
    loadFailed: (reply) => {
      // A missing package's message names the server's directories: the log gets it, the memory does not.
      console.error("[engram] extraction: the worker could not load the parsers:", reply.error);
      return new ExtractionWorkerError("the reader failed to start");
    },
    crashed: (error, options) => {
      if (error.code === "ERR_WORKER_OUT_OF_MEMORY") {
        return new ExtractionStoppedError(`it needed more than ${options?.resourceLimits?.maxOldGenerationSizeMb} MiB of memory to read and was stopped`);
      }
      // Other failures are ours, not the file's: their detail goes to the log, not to processing_error.
      console.error("[engram] extraction: the worker failed", error);
      return new ExtractionWorkerError("the reader stopped unexpectedly");
    },
    exited: (_code, loaded) => new ExtractionWorkerError(loaded ? "the reader stopped unexpectedly" : "the reader failed to start"),
  });
}

// One per process, also when several route bundles include this module.
const globalForExtraction = globalThis as unknown as { __engramExtractionThread?: WorkerLane<Reply> | null };
let warned = false;

function run(task: Task, signal?: AbortSignal): Promise<unknown> {
  if (globalForExtraction.__engramExtractionThread === undefined) {
    const script = extractWorkerScript();
    globalForExtraction.__engramExtractionThread = script ? extractionLane(script) : null;
  }
  const thread = globalForExtraction.__engramExtractionThread;
  if (thread) {
    // A copy the worker can own: the caller's Buffer may be a slice of a shared pool.
    const bytes = new Uint8Array(task.bytes);
    // The heap limit is fixed when the worker starts; its buffers' limit (buffer-guard.mjs) goes with each task.
    return thread.run({ ...task, bytes, memoryMb: extractionLimits().memoryMb }, [bytes.buffer], signal).then((reply) => reply.result);
  }
  if (!warned) {
    warned = true;
    console.warn("[engram] extraction: lib/extraction/extract-worker.mjs is missing; files and pages are read in the main thread, without a time limit");
  }
  return task.task === "page" ? Promise.resolve(htmlToMarkdown(task.bytes.toString("utf8"))) : readDocument(task.kind, task.bytes, { maxContentBytes: task.maxContentBytes });
}

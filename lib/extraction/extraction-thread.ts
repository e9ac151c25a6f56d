import { existsSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { positiveIntEnv } from "@/lib/config.ts";
import { htmlToMarkdown, type ReadableDocument } from "./html-to-markdown.mjs";
import { readDocument, type DocumentKind, type ReadDocument } from "./read-document.mjs";

/** Time limit of one file or page, and the memory its reading may use (documented in docs/files.md). */
export function extractionLimits(): { timeoutMs: number; memoryMb: number } {
  return { timeoutMs: positiveIntEnv("ENGRAM_EXTRACT_TIMEOUT_MS", 30_000), memoryMb: positiveIntEnv("ENGRAM_EXTRACT_MEMORY_MB", 512) };
}

/**
 * Reading was stopped at a limit. The message is shown in processing_error after "The file could not
 * be read: " (or "The page …"), so it names the limit and nothing of the server.
 */
export class ExtractionStoppedError extends Error {}

/** The worker script (plain ESM, loaded by Node outside the Next bundle), or null when it is not there. */
export function extractWorkerScript(): string | null {
  const script = path.join(process.cwd(), "lib", "extraction", "extract-worker.mjs");
  return existsSync(script) ? script : null;
}

type Task = { task: "document"; kind: DocumentKind; bytes: Buffer; maxContentBytes: number } | { task: "page"; bytes: Buffer };

/** A file's text, read in the extraction thread. */
export function readDocumentInThread(kind: DocumentKind, bytes: Buffer, maxContentBytes: number): Promise<ReadDocument> {
  return run({ task: "document", kind, bytes, maxContentBytes }) as Promise<ReadDocument>;
}

/** A fetched HTML page as markdown, read in the extraction thread. */
export function readPageInThread(html: Buffer): Promise<ReadableDocument> {
  return run({ task: "page", bytes: html }) as Promise<ReadableDocument>;
}

interface Job {
  message: Omit<Task, "bytes"> & { id: number; bytes: Uint8Array<ArrayBuffer> };
  resolve(result: unknown): void;
  reject(error: Error): void;
}

interface Reply {
  id?: number;
  ready?: boolean;
  result?: unknown;
  error?: string;
}

/**
 * One long-lived worker, one task at a time: the time limit runs from when a task reaches the
 * worker, so files queued behind a slow one are not charged for its time. A task over its limit
 * terminates the worker (a parser stuck in a loop cannot be interrupted any other way); the next
 * task starts a fresh one. The worker keeps the process alive only while a task runs.
 */
class ExtractionThread {
  private readonly queue: Job[] = [];
  private worker?: Promise<Worker>;
  private live?: Worker;
  private busy = false;
  private nextId = 0;

  constructor(private readonly script: string) {}

  run(task: Task): Promise<unknown> {
    // A copy the worker can own: the caller's Buffer may be a slice of a shared pool.
    const bytes = new Uint8Array(task.bytes);
    return new Promise((resolve, reject) => {
      this.queue.push({ message: { ...task, bytes, id: this.nextId++ }, resolve, reject });
      void this.next();
    });
  }

  private async next(): Promise<void> {
    if (this.busy) return;
    const job = this.queue.shift();
    if (!job) return;
    this.busy = true;
    let worker: Worker;
    try {
      worker = await (this.worker ??= this.start());
    } catch (error) {
      this.forget();
      this.finish(() => job.reject(error as Error));
      return;
    }
    const { timeoutMs } = extractionLimits();
    let settled = false;
    const settle = (done: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("exit", onExit);
      this.finish(done);
    };
    const stop = (error: Error) => {
      if (this.live === worker) this.forget();
      void worker.terminate();
      settle(() => job.reject(error));
    };
    const onMessage = (reply: Reply) => {
      if (reply.id !== job.message.id) return;
      worker.unref();
      settle(() => (reply.error !== undefined ? job.reject(new Error(reply.error)) : job.resolve(reply.result)));
    };
    const onExit = () => stop(stopReasons.get(worker) ?? new Error("the reader stopped unexpectedly"));
    const timer = setTimeout(() => stop(new ExtractionStoppedError(`it took longer than ${timeoutMs / 1000} s to read and was stopped`)), timeoutMs);
    worker.on("message", onMessage);
    worker.on("exit", onExit);
    worker.ref();
    worker.postMessage(job.message, [job.message.bytes.buffer]);
  }

  private finish(done: () => void): void {
    this.busy = false;
    done();
    void this.next();
  }

  private start(): Promise<Worker> {
    const { memoryMb } = extractionLimits();
    const worker = new Worker(this.script, { resourceLimits: { maxOldGenerationSizeMb: memoryMb } });
    this.live = worker;
    return new Promise<Worker>((resolve, reject) => {
      worker.once("message", (reply: Reply) => {
        if (reply.ready) {
          worker.unref();
          resolve(worker);
        } else {
          // A missing package's message names the server's directories: the log gets it, the memory does not.
          console.error("[engram] extraction: the worker could not load the parsers:", reply.error);
          reject(new Error("the reader failed to start"));
          void worker.terminate();
        }
      });
      // 'error' comes before 'exit', which settles the running task with the reason kept here.
      worker.on("error", (error: Error & { code?: string }) => {
        const outOfMemory = error.code === "ERR_WORKER_OUT_OF_MEMORY";
        // Other failures are ours, not the file's: their detail goes to the log, not to processing_error.
        if (!outOfMemory) console.error("[engram] extraction: the worker failed", error);
        const reason = outOfMemory
          ? new ExtractionStoppedError(`it needed more than ${memoryMb} MiB of memory to read and was stopped`)
          : new Error("the reader stopped unexpectedly");
        stopReasons.set(worker, reason);
        reject(reason);
      });
      worker.on("exit", () => {
        reject(new Error("the reader failed to start"));
        // Whatever the cause, the next task starts a fresh worker.
        if (this.live === worker) this.forget();
      });
    });
  }

  private forget(): void {
    this.worker = undefined;
    this.live = undefined;
  }
}

/** Why a worker died, for the task it was running (its 'exit' event carries only a code). */
const stopReasons = new WeakMap<Worker, Error>();

// One per process, also when several route bundles include this module.
const globalForExtraction = globalThis as unknown as { __engramExtractionThread?: ExtractionThread | null };
let warned = false;

function run(task: Task): Promise<unknown> {
  if (globalForExtraction.__engramExtractionThread === undefined) {
    const script = extractWorkerScript();
    globalForExtraction.__engramExtractionThread = script ? new ExtractionThread(script) : null;
  }
  const thread = globalForExtraction.__engramExtractionThread;
  if (thread) return thread.run(task);
  if (!warned) {
    warned = true;
    console.warn("[engram] extraction: lib/extraction/extract-worker.mjs is missing; files and pages are read in the main thread, without a time limit");
  }
  return task.task === "page" ? Promise.resolve(htmlToMarkdown(task.bytes.toString("utf8"))) : readDocument(task.kind, task.bytes, { maxContentBytes: task.maxContentBytes });
}

// File and page text extraction in its own thread. A crafted PDF, DOCX or page can keep a parser busy
// for minutes or fill memory; here it blocks only this thread, which the main thread terminates at
// its time limit (and Node at its memory limit), while HTTP and the embedded database carry on.
// Plain ESM: Node loads this file directly, outside the Next bundle.
//
// in:  { id, task: "document", kind, bytes: Uint8Array, maxContentBytes, memoryMb } → { id, result: { text, title?, error? } }
//      { id, task: "page", bytes: Uint8Array, memoryMb }                            → { id, result: { title, markdown } }
//      or { id, error } when the parser throws or its buffers would pass memoryMb
// first message out: { ready: true } or { ready: false, error }
import { parentPort } from "node:worker_threads";
import { installBufferGuard } from "./buffer-guard.mjs";
import { htmlToMarkdown } from "./html-to-markdown.mjs";
import { loadParsers, readDocument } from "./read-document.mjs";

try {
  await loadParsers();
  const guard = installBufferGuard();
  parentPort.postMessage({ ready: true });
  // The main thread sends one task at a time (its time limit is per task), so no queue here.
  parentPort.on("message", async ({ id, task, kind, bytes, maxContentBytes, memoryMb }) => {
    guard.reset(memoryMb * 1024 * 1024);
    const overLimit = () => `it needed more than ${memoryMb} MiB of memory to read and was stopped`;
    try {
      const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const result = task === "page" ? htmlToMarkdown(buffer.toString("utf8")) : await readDocument(kind, buffer, { maxContentBytes });
      // A refused buffer the parser caught and read on past: what it returned is missing that part.
      parentPort.postMessage(guard.tripped ? { id, error: overLimit() } : { id, result });
    } catch (error) {
      parentPort.postMessage({ id, error: guard.tripped ? overLimit() : error instanceof Error ? error.message : String(error) });
    }
  });
} catch (error) {
  parentPort.postMessage({ ready: false, error: error instanceof Error ? error.message : String(error) });
}

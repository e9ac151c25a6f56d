import type { Readable } from "node:stream";

/**
 * Reads a stream to its end the way a download's HTTP client may: it stops reading for `pauseMs`
 * after the first part (a slow link, a full window), so the source is held back meanwhile.
 */
export async function readPausing(stream: Readable, pauseMs: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let paused = false;
  for await (const part of stream) {
    parts.push(Buffer.from(part as Uint8Array));
    if (!paused) {
      paused = true;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
  return Buffer.concat(parts);
}

import { describe, expect, it } from "vitest";
import { MAX_QUEUED_BYTES, sseResponse, type SseWriter } from "@/lib/api/sse.ts";

/** Opens an SSE response and hands back its writer once `run` starts. */
async function open(run: (writer: SseWriter) => Promise<void> | void = () => undefined) {
  let writer!: SseWriter;
  let body!: ReadableStreamDefaultReader<Uint8Array>;
  const started = new Promise<void>((resolve) => {
    const res = sseResponse(async (w) => {
      writer = w;
      resolve();
      await run(w);
    });
    body = res.body!.getReader();
  });
  await started;
  return { writer, reader: body };
}

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

describe("sseResponse", () => {
  it("ends the stream of a client that stops reading once about 1 MiB is queued, instead of growing without bound", async () => {
    const { writer } = await open();
    const chunk = "x".repeat(10_000);
    let sent = 0;
    while (writer.send("note", { chunk }) && sent < 1_000) sent += 1;
    expect(writer.closed).toBe(true);
    expect(sent * chunk.length).toBeGreaterThan(MAX_QUEUED_BYTES * 0.9);
    expect(sent * chunk.length).toBeLessThan(MAX_QUEUED_BYTES * 1.1);
  });

  it("drained() waits until the client has read what is queued", async () => {
    const { writer, reader } = await open();
    for (let i = 0; i < 10; i++) writer.send("note", { chunk: "y".repeat(10_000) });
    let drained = false;
    const waiting = writer.drained().then(() => (drained = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(drained).toBe(false);
    for (let i = 0; i < 11; i++) await reader.read();
    await waiting;
    expect(drained).toBe(true);
    expect(writer.closed).toBe(false);
  });

  it("a stream whose work fails says so and ends, so the client reconnects", async () => {
    const { reader } = await open(() => {
      throw new Error("subscribe failed");
    });
    const text = await readAll(reader);
    expect(text).toContain("event: error");
    expect(text).toContain('"code":"internal"');
  });
});

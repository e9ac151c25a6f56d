import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { WorkerLane, type WorkerReply } from "@/lib/worker-lane.ts";

interface Reply extends WorkerReply {
  echo?: unknown;
}

/** A worker that answers every task with what it was sent. */
function echoLane(timeoutMs: number): WorkerLane<Reply> {
  const script = path.join(mkdtempSync(path.join(tmpdir(), "engram-lane-")), "worker.mjs");
  writeFileSync(
    script,
    `import { parentPort } from "node:worker_threads";
     parentPort.postMessage({ ready: true });
     parentPort.on("message", ({ id, value, sleepMs, spinMs }) => {
       // Busy like a parser in a long document: nothing but terminate() stops it.
       for (const until = Date.now() + (spinMs ?? 0); Date.now() < until; );
       setTimeout(() => parentPort.postMessage({ id, echo: value }), sleepMs ?? 0);
     });`,
  );
  return new WorkerLane<Reply>({
    script,
    timeoutMs: () => timeoutMs,
    timedOut: (ms) => new Error(`no answer within ${ms} ms`),
    loadFailed: () => new Error("did not load"),
    crashed: (error) => error,
    exited: (code) => new Error(`exited (code ${code})`),
  });
}

describe("WorkerLane", () => {
  it("a task whose message cannot be sent to the worker fails at once, and the next task runs", async () => {
    const lane = echoLane(5_000);
    await lane.start();
    // A function cannot be cloned: postMessage throws synchronously. Before, the throw escaped the lane
    // (an unhandled rejection) and the task waited for its whole time limit, every later task behind it.
    const settled = await Promise.race([
      lane.run({ value: () => 1 }).then(
        () => "resolved",
        (error: Error) => error.name,
      ),
      new Promise((resolve) => setTimeout(() => resolve("still waiting"), 1_000)),
    ]);
    expect(settled).toBe("DataCloneError");
    expect((await lane.run({ value: "next" })).echo).toBe("next");
  });

  it("a task waiting behind another leaves the queue at once when its signal aborts (its job's lease was lost)", async () => {
    const lane = echoLane(10_000);
    await lane.start();
    const slow = lane.run({ value: "slow", sleepMs: 1_500 });
    const lost = new AbortController();
    const waiting = lane.run({ value: "waiting" }, [], lost.signal).then(
      () => "resolved",
      (error: Error) => error.message,
    );
    lost.abort(new Error("the job's lease was lost"));
    // Not after the slow task ahead of it: a job given up held its worker (and its page) until its turn came.
    const settled = await Promise.race([waiting, new Promise((resolve) => setTimeout(() => resolve("still waiting"), 500))]);
    expect(settled).toBe("the job's lease was lost");
    expect((await slow).echo).toBe("slow");
    expect((await lane.run({ value: "next" })).echo).toBe("next");
  });

  it("a task the worker is busy with is stopped when its signal aborts, and the next task gets a fresh worker at once", async () => {
    // Only a task still waiting left at the abort: one the worker had started (a parse of a long PDF) ran
    // on to its end or its time limit, the thread's CPU spent on a result no one takes, and every task
    // behind it waited for it.
    const lane = echoLane(60_000);
    await lane.start();
    const lost = new AbortController();
    const began = Date.now();
    const busy = lane.run({ value: "busy", spinMs: 8_000 }, [], lost.signal).then(
      () => "resolved",
      (error: Error) => error.message,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    lost.abort(new Error("the job's lease was lost"));
    const settled = await Promise.race([busy, new Promise((resolve) => setTimeout(() => resolve("still busy"), 1_500))]);
    expect(settled).toBe("the job's lease was lost");
    expect((await lane.run({ value: "next" })).echo).toBe("next");
    expect(Date.now() - began).toBeLessThan(6_000);
  }, 20_000);

  it("the extraction thread stops parsing a page once the job's lease is lost", async () => {
    const { readPageInThread } = await import("@/lib/extraction/extraction-thread.ts");
    // Seconds of parsing in the extraction thread (tests/extraction-limits.test.ts measures 4.6 s for a fifth of it).
    const nested = `<html><head><title>Nested</title></head><body>${"<ul><li>Some words in a list item.".repeat(120).concat("</li></ul>".repeat(120)).repeat(300)}</body></html>`;
    const article = `<!doctype html><html><head><title>Kiln guide</title></head><body><article><h1>Kiln guide</h1><p>${"Let the kiln cool for a full day before opening it. ".repeat(5)}</p></article></body></html>`;
    await readPageInThread(Buffer.from(article));
    const lost = new AbortController();
    const began = Date.now();
    const parse = readPageInThread(Buffer.from(nested), lost.signal).then(
      () => "resolved",
      (error: Error) => error.message,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    lost.abort(new Error("the job's lease was lost"));
    expect(await Promise.race([parse, new Promise((resolve) => setTimeout(() => resolve("still parsing"), 1_500))])).toBe("the job's lease was lost");
    // The next page is read by a fresh thread, not after the lost parse.
    expect((await readPageInThread(Buffer.from(article))).title).toBe("Kiln guide");
    expect(Date.now() - began).toBeLessThan(8_000);
  }, 60_000);

  it("a worker ended mid-task is gone before the next task's worker starts: never two threads at once", async () => {
    // live.end did not wait for worker.terminate(): the next task spawned its worker at once, so two
    // threads lived side by side (for the extraction thread, two parses' memory, up to ENGRAM_EXTRACT_MEMORY_MB each).
    const script = path.join(mkdtempSync(path.join(tmpdir(), "engram-lane-")), "worker.mjs");
    writeFileSync(
      script,
      `import { parentPort } from "node:worker_threads";
       parentPort.postMessage({ ready: true });
       parentPort.on("message", ({ id, value, spinMs }) => {
         for (const until = Date.now() + (spinMs ?? 0); Date.now() < until; );
         parentPort.postMessage({ id, echo: value });
       });`,
    );
    let started = 0;
    let exited = 0;
    const aliveAtStart: number[] = [];
    const lane = new WorkerLane<Reply>({
      script,
      workerOptions: () => {
        aliveAtStart.push(started - exited);
        started++;
        return {};
      },
      timeoutMs: () => 60_000,
      timedOut: (ms) => new Error(`no answer within ${ms} ms`),
      loadFailed: () => new Error("did not load"),
      crashed: (error) => error,
      exited: (code) => {
        exited++;
        return new Error(`exited (code ${code})`);
      },
    });
    await lane.start();
    for (let i = 0; i < 3; i++) {
      const lost = new AbortController();
      const busy = lane.run({ value: "busy", spinMs: 5_000 }, [], lost.signal).catch((error: Error) => error.message);
      const next = lane.run({ value: `next ${i}` });
      await new Promise((resolve) => setTimeout(resolve, 200));
      lost.abort(new Error("the job's lease was lost"));
      expect(await busy).toBe("the job's lease was lost");
      expect((await next).echo).toBe(`next ${i}`);
    }
    expect(started).toBe(4);
    expect(aliveAtStart).toEqual([0, 0, 0, 0]);
  }, 30_000);
});

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
     parentPort.on("message", ({ id, value, sleepMs }) => setTimeout(() => parentPort.postMessage({ id, echo: value }), sleepMs ?? 0));`,
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
});

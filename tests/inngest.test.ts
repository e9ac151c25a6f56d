import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { InngestTestEngine, mockCtx } from "@inngest/test";
import { afterAll, beforeAll, describe, expect, it, type Mock } from "vitest";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { MEMORY_PROCESS_EVENT } from "@/inngest/client.ts";
import { processMemoryFunction, sweepProcessingFunction } from "@/inngest/functions.ts";
import { setEmbedder } from "@/lib/ai/embedder.ts";
import { claimMemory } from "@/lib/processing/process-memory.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";

// No runner is started here: memories stay pending until an Inngest function processes them.
let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => h.close());

/**
 * The last try of each step (Inngest's `attempt`, 0-based, of `maxAttempts` = retries + 1), with embeddings
 * from a local OpenAI-compatible stand-in that answers 503 (after `onRequest`). If the run fails, its
 * onFailure handler (if any) runs as Inngest calls it, with the failed run's event and error.
 */
/**
 * Runs `fn` with embeddings from a local stand-in for an OpenAI-compatible server, which answers every
 * request with `status` and `message` (after `onRequest`, when given); the environment and embedder
 * are restored after.
 */
async function withProvider<T>(answer: { status: number; message: string; type?: string; key?: string; onRequest?: () => Promise<void> }, fn: () => Promise<T>): Promise<T> {
  const provider = createServer((_req, res) => {
    void (answer.onRequest?.() ?? Promise.resolve()).then(() =>
      res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: answer.message, ...(answer.type && { type: answer.type }) } })),
    );
  });
  await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
  const saved = { ...process.env };
  Object.assign(process.env, {
    ENGRAM_EMBEDDINGS_PROVIDER: "openai",
    OPENAI_API_KEY: answer.key ?? "sk-test",
    OPENAI_BASE_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`,
  });
  setEmbedder(undefined);
  try {
    return await fn();
  } finally {
    process.env = saved;
    setEmbedder(undefined);
    await new Promise((resolve) => provider.close(resolve));
  }
}

/** A run's last try (attempt 4 of 5) against a provider answering 503, then onFailure as Inngest would call it, if any. */
function lastTryAgainst503(id: string, onRequest: () => Promise<void>) {
  return withProvider({ status: 503, message: "Overloaded", onRequest }, async () => {
    const original = { name: MEMORY_PROCESS_EVENT, data: { id } };
    const run = await new InngestTestEngine({
      function: processMemoryFunction,
      events: [original],
      transformCtx: (ctx) => mockCtx({ ...ctx, attempt: 4, maxAttempts: 5 }),
    }).execute();
    const onFailure = (processMemoryFunction as unknown as { onFailureFn?: (ctx: unknown) => Promise<unknown> }).onFailureFn;
    if (run.error && onFailure) await onFailure({ event: { name: "inngest/function.failed", data: { event: original, error: run.error } }, error: run.error });
    return run;
  });
}

const runFor = (id: string) =>
  new InngestTestEngine({ function: processMemoryFunction, events: [{ name: MEMORY_PROCESS_EVENT, data: { id } }] }).execute();

const content = [
  "# Incident 42",
  "Yesterday the queue workers stalled for an hour after the broker upgrade.",
  "## Timeline",
  Array.from({ length: 30 }, (_, i) => `At step ${i} the on-call engineer restarted worker ${i} and watched the backlog drain.`).join(" "),
].join("\n\n");


/** One run of processMemoryFunction, with `after(name)` called once each step has returned (replays included). */
function runWithAfterStep(id: string, after: (name: string) => Promise<void>) {
  return new InngestTestEngine({
    function: processMemoryFunction,
    events: [{ name: MEMORY_PROCESS_EVENT, data: { id } }],
    transformCtx: (ctx) => {
      const run = ctx.step.run;
      const step = {
        ...ctx.step,
        run: (async (name: string, fn: () => unknown) => {
          const output = await run(name, fn);
          await after(name);
          return output;
        }) as typeof run,
      };
      return mockCtx({ ...ctx, step });
    },
  }).execute();
}

describe("Inngest functions (@inngest/test, real steps against the real database)", () => {
  it("process-memory runs claim, extract, classify, index, summarise and complete as steps", async () => {
    const id = (await ann.post("/v1/memories", { content })).body.data.id;
    const { result, ctx } = await runFor(id);
    expect(result).toEqual({ status: "done" });
    expect(ctx.step.run).toHaveBeenCalledWith("claim", expect.any(Function));
    for (const name of ["extract", "classify", "index", "summarise", "complete"]) expect(ctx.step.run).toHaveBeenCalledWith(name, expect.any(Function));

    const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
    expect(memory).toMatchObject({ processing_status: "done", kind: "episodic", processing_error: null });
    expect(memory.summary).toBe("Yesterday the queue workers stalled for an hour after the broker upgrade. At step 0 the on-call engineer restarted worker 0 and watched the backlog drain.");
    const chunks = await h.database.sql.query<{ heading_chain: string; dims: number }>(
      `SELECT heading_chain, vector_dims(embedding) AS dims FROM chunks WHERE memory_id = $1 ORDER BY position`,
      [id],
    );
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    expect(chunks.every((c) => c.dims === 384)).toBe(true);
    expect(chunks.at(-1)!.heading_chain).toBe("Incident 42 > Timeline");
  });

  it("a duplicate or late event is harmless: nothing to claim", async () => {
    const id = (await ann.post("/v1/memories", { content: "Duplicate event target." })).body.data.id;
    expect((await runFor(id)).result).toEqual({ status: "done" });
    const processedAt = (await h.db.memory.findUniqueOrThrow({ where: { id } })).processedAt;
    expect((await runFor(id)).result).toEqual({ status: "skipped" });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).processedAt).toEqual(processedAt);
    expect((await runFor("01a1ff23-0000-7000-8000-000000000000")).result).toEqual({ status: "skipped" });
  });

  it("sweep-processing re-sends events for pending and orphaned memories", async () => {
    const pending = (await ann.post("/v1/memories", { content: "Waiting for its event." })).body.data.id;
    // Its event went out with the write an hour ago and was lost.
    await backdateMemories(h.db, pending, { updatedAt: new Date(Date.now() - 3_600_000) });
    const orphan = (await ann.post("/v1/memories", { content: "Its worker died." })).body.data.id;
    await h.db.memory.update({ where: { id: orphan }, data: { processingStatus: "running", processingStartedAt: new Date(Date.now() - 3_600_000) } });
    const fresh = (await ann.post("/v1/memories", { content: "Running right now." })).body.data.id;
    await h.db.memory.update({ where: { id: fresh }, data: { processingStatus: "running", processingStartedAt: new Date() } });

    // Sending reaches Inngest Cloud, so that one step is mocked with the official test tool.
    const { result, ctx } = await new InngestTestEngine({
      function: sweepProcessingFunction,
      steps: [{ id: "enqueue", handler: () => ({ ids: ["evt-1", "evt-2"] }) }],
    }).execute();
    expect(result).toEqual({ enqueued: 2 });
    expect(ctx.step.sendEvent).toHaveBeenCalledWith("enqueue", [
      { name: MEMORY_PROCESS_EVENT, data: { id: pending } },
      { name: MEMORY_PROCESS_EVENT, data: { id: orphan } },
    ]);
    expect((await runFor(orphan)).result).toEqual({ status: "done" });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: orphan } })).processingStatus).toBe("done");
  });

  it("sweep-processing re-sends a memory's event once per stale timeout, not on every sweep while it waits in Inngest's queue", async () => {
    const { staleMs } = processingConfig();
    const sweep = async () => {
      const { ctx } = await new InngestTestEngine({ function: sweepProcessingFunction, steps: [{ id: "enqueue", handler: () => ({ ids: [] }) }] }).execute();
      return (ctx.step.sendEvent as unknown as Mock).mock.calls.flatMap(([, events]) => (events as { data: { id: string } }[]).map((event) => event.data.id));
    };
    const lost = (await ann.post("/v1/memories", { content: "Its event was lost an hour ago." })).body.data.id;
    await backdateMemories(h.db, lost, { updatedAt: new Date(Date.now() - 3_600_000) });
    const orphan = (await ann.post("/v1/memories", { content: "Its run died an hour ago." })).body.data.id;
    await h.db.memory.update({ where: { id: orphan }, data: { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000) } });
    // Just written: its event went out with the write and waits in the queue (a backlog, 4 runs at a time).
    const queued = (await ann.post("/v1/memories", { content: "Its event is in the queue." })).body.data.id;

    const first = await sweep();
    expect(first).toEqual(expect.arrayContaining([lost, orphan]));
    expect(first).not.toContain(queued);
    // Before, every sweep (the cron's, and each server's every 30 s) sent all three again: duplicate runs
    // piled up behind the backlog.
    const second = await sweep();
    expect(second.filter((id) => [lost, orphan, queued].includes(id))).toEqual([]);

    // A stale timeout later, still waiting: sent once more.
    const earlier = new Date(Date.now() - staleMs - 1_000);
    await h.db.memory.updateMany({ where: { id: { in: [lost, orphan] } }, data: { processingQueuedAt: earlier } });
    await backdateMemories(h.db, queued, { updatedAt: earlier });
    expect(await sweep()).toEqual(expect.arrayContaining([lost, orphan, queued]));
  });

  it("a step failing on its last try fails the memory its run holds, with the reason, still found by its words", async () => {
    const id = (await ann.post("/v1/memories", { content: "The greenhouse vents open at 24 degrees." })).body.data.id;
    const run = await lastTryAgainst503(id, async () => {});
    const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ processingStatus: "failed", processingAttempts: 1, processingError: "The model provider answered HTTP 503: Overloaded" });
    expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(1);
    const chunks = await h.database.sql.query<{ has_vector: boolean }>(`SELECT embedding IS NOT NULL AS has_vector FROM chunks WHERE memory_id = $1`, [id]);
    expect(chunks).toEqual([{ has_vector: false }]);
    // Recorded by the step itself: the run ends, it does not fail over to Inngest.
    expect(run.error).toBeUndefined();
    expect(run.result).toEqual({ status: "failed" });
  });

  it("a stale run failing for good does not fail the memory that a newer run holds", async () => {
    const id = (await ann.post("/v1/memories", { content: "The orchard is netted before the cherries ripen." })).body.data.id;
    const run = await lastTryAgainst503(id, async () => {
      // While this run's step waited between retries, the memory looked stalled: the sweeper re-sent
      // it and a newer run claimed it (attempt 2), which is still working on it.
      await h.db.memory.update({ where: { id }, data: { processingAttempts: 2, processingStartedAt: new Date() } });
    });
    // Before, the stale run's onFailure saw 'running' and failed the memory under the newer run.
    const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ processingStatus: "running", processingAttempts: 2 });
    expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(0);
    expect(run.error).toBeUndefined();
    expect(run.result).toEqual({ status: "stale" });
    // The newer run (here once its claim looks stalled too) finishes the memory as usual.
    await h.db.memory.update({ where: { id }, data: { processingStartedAt: new Date(Date.now() - 3_600_000) } });
    expect((await runFor(id)).result).toEqual({ status: "done" });
  });

  it("a run overtaken by a newer run stops at its next step: it does not finish the memory under the newer run", async () => {
    const id = (await ann.post("/v1/memories", { content: "The beehives are moved to the heather in late July." })).body.data.id;
    const { result } = await runWithAfterStep(id, async (name) => {
      // Once `index` is done, the memory looks stalled (a slow provider, Inngest's retry backoff):
      // the sweeper re-sends it and a newer run claims it (attempt 2).
      if (name === "index") await h.db.memory.update({ where: { id }, data: { processingAttempts: 2, processingStartedAt: new Date() } });
    });
    // Before, the old run went on to summarise and complete: `done` (and memory.processed) while the newer run still worked.
    const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect(row).toMatchObject({ processingStatus: "running", processingAttempts: 2 });
    expect(await h.db.event.count({ where: { type: "memory.processed", entityId: id } })).toBe(0);
    expect(result).toEqual({ status: "stale" });
  });

  it("a run whose steps take longer in all than the stale timeout renews its claim at each step: it is not taken over", async () => {
    const id = (await ann.post("/v1/memories", { content: "The greenhouse heater is tested every September." })).body.data.id;
    const { staleMs, maxAttempts, retryBaseMs } = processingConfig();
    const takeovers: number[] = [];
    const ran = new Set<string>();
    const { result } = await runWithAfterStep(id, async (name) => {
      // A step already run is replayed from memory on each later request of the run: it took no time.
      if (ran.has(name)) return;
      ran.add(name);
      // Each step takes 0.6 of the stale timeout (a slow provider, Inngest's queue): the clock moves
      // on by that much, and the sweep looks for stalled runs in between.
      const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
      await h.db.memory.update({ where: { id }, data: { processingStartedAt: new Date(row.processingStartedAt!.getTime() - 0.6 * staleMs) } });
      const now = new Date();
      const claim = await claimMemory(h.db, id, { now, staleBefore: new Date(now.getTime() - staleMs), maxAttempts, retryBaseMs });
      if (claim) takeovers.push(claim.attempt);
    });
    // Before, the claim was never renewed: after two steps the run looked stalled and was taken over
    // (and after the maximum attempts a memory whose work succeeded ended failed, "interrupted").
    expect(takeovers).toEqual([]);
    expect(result).toEqual({ status: "done" });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "done", processingAttempts: 1 });
  });

  it("a provider that refuses the request (HTTP 401) ends the run at once: no step retries, the memory failed with the reason", async () => {
    // A local stand-in for an OpenAI-compatible server that rejects the key.
    await withProvider({ status: 401, message: "Incorrect API key provided", type: "invalid_request_error", key: "sk-wrong" }, async () => {
      const id = (await ann.post("/v1/memories", { content: "The bees are checked for mites in August." })).body.data.id;
      // Without the verdict the step threw and Inngest retried it 4 times, each refused alike.
      const { result, error } = await runFor(id);
      expect(error).toBeUndefined();
      expect(result).toEqual({ status: "failed" });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
      expect(row).toMatchObject({ processingStatus: "failed", processingAttempts: 1, processingError: "The model provider answered HTTP 401: Incorrect API key provided" });
      // Still found by its words.
      const chunks = await h.database.sql.query<{ has_vector: boolean }>(`SELECT embedding IS NOT NULL AS has_vector FROM chunks WHERE memory_id = $1`, [id]);
      expect(chunks).toEqual([{ has_vector: false }]);
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { backgroundRunner, drainBackgroundProcessing, startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { getEmbedder } from "@/lib/ai/embedder.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { randomUUID } from "node:crypto";

let h: Harness;
let ann: Client;

const section = (topic: string, n: number) =>
  Array.from({ length: n }, (_, i) => `The ${topic} check ${i + 1} confirms every service reports healthy before traffic moves on.`).join(" ");
const runbook = [
  "# Release process",
  "Every Tuesday we ship the monolith after the freeze.",
  "## Preparation",
  "1. Freeze the release branch.\n2. Run the database migrations.\n3. Deploy the canary and watch it.",
  section("preparation", 14),
  "## Rollback",
  "Roll back when the error rate doubles within ten minutes of a deploy.",
  section("rollback", 14),
].join("\n\n");

const processed = (client: Client, id: string, timeoutMs = 30_000) => waitProcessed(h.db, client, id, timeoutMs);
/**
 * When a dead worker's `running` row started: the embedded database has one process, so any such row
 * is orphaned at start-up; on PostgreSQL another process may own it until the stale timeout passes.
 */
const orphanedSince = () => new Date(Date.now() - (h.database.kind === "pglite" ? 60_000 : processingConfig().staleMs + 60_000));

async function chunksOf(id: string) {
  return h.database.sql.query<{ position: number; content: string; heading_chain: string; token_count: number; has_vector: boolean; dims: number | null; lexical: boolean }>(
    `SELECT position, content, heading_chain, token_count, embedding IS NOT NULL AS has_vector, vector_dims(embedding) AS dims,
            search_vector IS NOT NULL AND search_vector <> ''::tsvector AS lexical
       FROM chunks WHERE memory_id = $1 ORDER BY position`,
    [id],
  );
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  await h.close();
});

describe("background processing (embedded runner, real model, real database)", () => {
  it("creates answer at once; classify, chunk, embed and summarise follow", async () => {
    const res = await ann.post("/v1/memories", { content: runbook });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ state: "active", processing_status: "pending", summary: "", processed_at: null });

    const memory = await processed(ann, res.body.data.id);
    expect(memory.processing_status).toBe("done");
    expect(memory.processing_error).toBeNull();
    // Waiting did not read the memory through the API: the one read is the one above.
    expect(memory.access_count).toBe(1);
    expect(Date.parse(memory.processed_at)).toBeGreaterThanOrEqual(Date.parse(memory.created_at));
    expect(memory.kind).toBe("procedural");
    expect(memory.summary).toBe("Every Tuesday we ship the monolith after the freeze. Freeze the release branch.");

    const chunks = await chunksOf(memory.id);
    expect(chunks.map((c) => c.heading_chain)).toEqual(["Release process > Preparation", "Release process > Rollback"]);
    expect(chunks[0]!.content).toContain("Every Tuesday"); // the short intro joins the first section
    for (const chunk of chunks) {
      expect(chunk).toMatchObject({ has_vector: true, dims: 384, lexical: true });
      expect(chunk.token_count).toBeGreaterThan(0);
    }
  });

  it("stores vectors that find the right chunk by meaning", async () => {
    const res = await ann.post("/v1/memories", { content: runbook.replace("Tuesday", "Wednesday") });
    await processed(ann, res.body.data.id);
    const [query] = await (await getEmbedder())!.embed(["when should we revert a bad release?"], "query");
    const [best] = await h.database.sql.query<{ heading_chain: string }>(
      `SELECT heading_chain FROM chunks WHERE memory_id = $1 ORDER BY embedding <=> $2::vector LIMIT 1`,
      [res.body.data.id, `[${query!.join(",")}]`],
    );
    expect(best!.heading_chain).toBe("Release process > Rollback");
  });

  it("indexes a Chinese note in English too: its lexical entry and its vector answer an English question", async () => {
    const res = await ann.post("/v1/memories", { content: "# 固件升级\n\n路由器的固件升级失败后，请按住重置按钮十秒。" });
    const memory = await processed(ann, res.body.data.id);
    const [chunk] = await h.database.sql.query<{ english: boolean; bigrams: boolean; embedding: string }>(
      `SELECT tsvector_to_array(engram_tsvector('router firmware upgrade reset button')) <@ tsvector_to_array(search_vector) AS english,
              tsvector_to_array(engram_tsvector('固件升级')) <@ tsvector_to_array(search_vector) AS bigrams,
              embedding::text AS embedding
         FROM chunks WHERE memory_id = $1`,
      [memory.id],
    );
    expect(chunk).toMatchObject({ english: true, bigrams: true });
    const stored = JSON.parse(chunk!.embedding) as number[];
    const [related, unrelated] = await (await getEmbedder())!.embed(["the router firmware upgrade failed", "the team lunch is on Friday"], "query");
    const dot = (v: number[]) => v.reduce((sum, x, i) => sum + x * stored[i]!, 0);
    expect(dot(related!)).toBeGreaterThan(dot(unrelated!) + 0.2);
  });

  it("respects a kind and stability the client gave", async () => {
    const res = await ann.post("/v1/memories", { content: runbook.replace("Tuesday", "Monday"), kind: "rationale", stability: "volatile" });
    const memory = await processed(ann, res.body.data.id);
    expect(memory).toMatchObject({ kind: "rationale", stability: "volatile", processing_status: "done" });
  });

  it("infers content_type from source_path and chunks code by function", async () => {
    const fn = (name: string) => [`def ${name}(rows):`, ...Array.from({ length: 12 }, (_, i) => `    rows = [r for r in rows if r.get("${name}_${i}")]`), "    return rows"].join("\n");
    const res = await ann.post("/v1/memories", { content: [fn("keep_active"), fn("drop_archived"), fn("dedupe")].join("\n\n"), source_path: "etl/filters.py" });
    const memory = await processed(ann, res.body.data.id);
    expect(memory.content_type).toBe("code");
    expect(memory.summary).toBe("Code defining `keep_active`, `drop_archived` and `dedupe`.");
    const chains = (await chunksOf(memory.id)).map((c) => c.heading_chain);
    expect(chains).toEqual(["def keep_active(rows)", "def drop_archived(rows)", "def dedupe(rows)"]);
  });

  it("re-processes after a content PATCH, replacing the old chunks", async () => {
    const res = await ann.post("/v1/memories", { content: "# Cache\n\nThe cache TTL is five minutes." });
    const first = await processed(ann, res.body.data.id);
    expect(first.summary).toBe("The cache TTL is five minutes.");
    const patched = await ann.patch(`/v1/memories/${first.id}`, { content: "# Cache\n\nThe cache TTL is now one hour, set in config/cache.yml." });
    expect(patched.body.data).toMatchObject({ version: 2, processing_status: "pending" });
    const second = await processed(ann, first.id);
    expect(second.summary).toBe("The cache TTL is now one hour, set in config/cache.yml.");
    const chunks = await chunksOf(first.id);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]!.content).toContain("one hour");
  });

  it("a new title is written into the chunks' lexical entries at once: recall finds the memory by it, nothing is re-processed", async () => {
    const res = await ann.post("/v1/memories", { content: "The boiler pressure should sit between one and two bar.\n\n每周检查一次安全阀。" });
    const first = await processed(ann, res.body.data.id);
    const words = async () =>
      ((await h.database.sql.query<{ words: string }>(`SELECT search_vector::text AS words FROM chunks WHERE memory_id = $1`, [first.id])) as { words: string }[]).map((r) => r.words).join(" ");
    const vectors = async () =>
      ((await h.database.sql.query<{ v: string }>(`SELECT embedding::text AS v FROM chunks WHERE memory_id = $1 ORDER BY position`, [first.id])) as { v: string }[]).map((r) => r.v);
    const before = await vectors();
    const glossed = await words();
    // The Chinese sentence is indexed with its English glosses ("safety valve"): only the Chinese says valve.
    expect(glossed).toContain("'valv'");
    const patched = await ann.patch(`/v1/memories/${first.id}`, { title: "Zanzibar heating plant" });
    // Not a new version, and not back to pending: kind, summary and vectors stay as they were.
    expect(patched.body.data).toMatchObject({ version: 1, title: "Zanzibar heating plant", processing_status: "done", summary: first.summary });
    const recalled = async (query: string) => (await ann.post("/v1/recall", { query })).body.data.memories.map((m: { id: string }) => m.id);
    // Before, the chunks kept the old title's words: a processed memory was never found by its new title
    // (other memories of this file may follow it on the vector leg's word).
    expect((await recalled("Zanzibar"))[0]).toBe(first.id);
    const after = await words();
    expect(after).toContain("'zanzibar'");
    // Every word it had is still there (the old title was its first line): the glosses included.
    for (const word of glossed.match(/'[^']+'/g)!) expect(after).toContain(word);
    expect(await vectors()).toEqual(before);
    expect(before.every(Boolean)).toBe(true);
  });

  it("a re-push of the same source_path with the same content and a new title re-indexes the chunks' entries too", async () => {
    const content = "The kiln is fired to cone six on Thursdays.";
    const first = await processed(ann, (await ann.post("/v1/memories", { content, source_path: "notes/kiln.md" })).body.data.id);
    const again = await ann.post("/v1/memories", { content, source_path: "notes/kiln.md", title: "Timbuktu pottery studio" });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: first.id, version: 1, processing_status: "done", title: "Timbuktu pottery studio" });
    const [chunk] = (await h.database.sql.query<{ words: string }>(`SELECT search_vector::text AS words FROM chunks WHERE memory_id = $1`, [first.id])) as { words: string }[];
    // Before, only PATCH re-indexed a new title: a re-push left the chunks with the old one.
    expect(chunk!.words).toContain("'timbuktu'");
    expect((await ann.post("/v1/recall", { query: "Timbuktu" })).body.data.memories.map((m: { id: string }) => m.id)).toContain(first.id);
  });

  it("discards the result of a job that started before the content changed", async () => {
    const runner = backgroundRunner()!;
    await runner.idle();
    stopBackgroundProcessing(); // this test drives the steps by hand
    try {
      const res = await ann.post("/v1/memories", { content: "Deploy keys rotate every 90 days." });
      const id = res.body.data.id;
      const now = new Date();
      const options = { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 };
      const claim = (await claimMemory(h.db, id, options))!;
      expect(claim).toMatchObject({ attempt: 1, memory: { id, version: 1 } });
      expect(await claimMemory(h.db, id, options)).toBeNull(); // claimed once only
      await ann.patch(`/v1/memories/${id}`, { content: "Deploy keys rotate every 30 days since the audit." });
      expect(await processMemory(h.db, claim, options)).toEqual({ status: "stale" });
      expect(await chunksOf(id)).toHaveLength(0);
      const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
      expect(row).toMatchObject({ version: 2, processingStatus: "pending", summary: "" });
      const fresh = (await claimMemory(h.db, id, { ...options, now: new Date() }))!;
      expect(await processMemory(h.db, fresh, options)).toEqual({ status: "done" });
      expect((await chunksOf(id))[0]!.content).toContain("30 days");
    } finally {
      await startBackgroundProcessing();
    }
  });

  it("the sweeper resumes pending work and orphaned running jobs", async () => {
    await backgroundRunner()!.idle();
    stopBackgroundProcessing();
    const a = (await ann.post("/v1/memories", { content: "Left pending while no runner was listening." })).body.data.id;
    const b = (await ann.post("/v1/memories", { content: "Claimed by a worker that died." })).body.data.id;
    await h.db.memory.update({ where: { id: b }, data: { processingStatus: "running", processingAttempts: 1, processingStartedAt: orphanedSince() } });
    await startBackgroundProcessing();
    expect((await processed(ann, a)).processing_status).toBe("done");
    const resumed = await processed(ann, b);
    expect(resumed.processing_status).toBe("done");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: b } })).processingAttempts).toBe(2);
  });

  it("sweeps keep coming after one that found the queue full (it settled at once and used to block every later sweep)", async () => {
    await backgroundRunner()!.idle();
    stopBackgroundProcessing();
    // A runner fed by sweeps only (no write hook), one job at a time: 250 unknown ids fill its queue.
    const runner = new EmbeddedRunner({ ...processingConfig(), concurrency: 1, sweepMs: 100, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      for (let i = 0; i < 250; i++) runner.enqueue(randomUUID());
      expect(runner.size.queued).toBeGreaterThanOrEqual(200);
      await runner.sweep(); // finds the queue full and looks no further
      const id = (await ann.post("/v1/memories", { content: "Only a later sweep can find this one." })).body.data.id;
      runner.start();
      await runner.idle();
      const deadline = Date.now() + 30_000;
      while ((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus !== "done" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStatus).toBe("done");
    } finally {
      runner.stop();
      await startBackgroundProcessing();
    }
  });

  it("a memory that crashed its worker every time ends failed, readable and lexically indexed", async () => {
    await backgroundRunner()!.idle();
    stopBackgroundProcessing();
    const id = (await ann.post("/v1/memories", { content: "Poison pill memory about the quarterly budget." })).body.data.id;
    await h.db.memory.update({ where: { id }, data: { processingStatus: "running", processingAttempts: 5, processingStartedAt: orphanedSince() } });
    await startBackgroundProcessing();
    const memory = await processed(ann, id);
    expect(memory.processing_status).toBe("failed");
    expect(memory.processing_error).toBe("processing was interrupted 5 times (the worker stopped mid-job)");
    expect(memory.state).toBe("active");
    expect(memory.summary).toBe("Poison pill memory about the quarterly budget.");
    expect(await chunksOf(id)).toEqual([expect.objectContaining({ has_vector: false, lexical: true })]);
    expect((await ann.get(`/v1/memories/${id}`)).status).toBe(200);
  });

  it("a graceful drain lets the job in progress finish and starts nothing new", async () => {
    await backgroundRunner()!.idle();
    const running = (await ann.post("/v1/memories", { content: "The staging cluster is rebuilt every Sunday night from the golden image." })).body.data.id;
    expect(backgroundRunner()!.size.active).toBe(1);
    expect(await drainBackgroundProcessing(30_000)).toBe(0);
    // Finished when the drain returns, not later.
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: running } })).processingStatus).toBe("done");
    expect(backgroundRunner()).toBeUndefined();
    const later = (await ann.post("/v1/memories", { content: "Pushed after the drain: waits for the next start." })).body.data.id;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: later } })).processingStatus).toBe("pending");
    await startBackgroundProcessing();
    expect((await processed(ann, later)).processing_status).toBe("done");
  });

  it("health reports the embedding model", async () => {
    const res = await h.anonymous.get("/v1/health");
    expect(res.body.data.embeddings).toEqual({ provider: "local", model: "Xenova/all-MiniLM-L6-v2", status: "ready" });
  });
});

import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { EMBEDDING_DIMENSIONS, setEmbedder } from "@/lib/ai/embedder.ts";
import { claimMemory, processMemory } from "@/lib/processing/process-memory.ts";
import { PROCESSING_STEPS } from "@/lib/processing/processing-steps.ts";
import { JobLease } from "@/lib/processing/job-lease.ts";
import { replaceChunks } from "@/lib/recall/store-chunks.ts";
import { setLinkFetchPolicyForTests } from "@/lib/links/safe-fetch.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./support/openai-chat-fake.ts";
import { updateMemory } from "@/lib/memories/update-memory.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";

/**
 * Edits that arrive while a job runs (no background runner here: the jobs are driven by hand, and an
 * embedder that waits for the test holds each one between its classify and complete steps).
 */
let h: Harness;
let ann: Client;
let release: () => void = () => {};
let embedding: () => void = () => {};
let failEmbedding = false;
let chat: FakeOpenAiChat;
const saved = { ...process.env };

beforeAll(async () => {
  // The chat model guesses: unlike the heuristics it can disagree with what the create stored.
  chat = await startFakeOpenAiChat((schema) =>
    schema === "memory_classification" ? { kind: "procedural", stability: "stable" } : { summary: "Three steps of a release." },
  );
  Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-test-mini", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: chat.url });
  setEmbedder({
    id: "local:held",
    dimensions: EMBEDDING_DIMENSIONS,
    embed: async (texts) => {
      if (failEmbedding) throw new Error("the model is down");
      embedding();
      await new Promise<void>((resolve) => (release = resolve));
      return texts.map(() => [1, ...new Array<number>(EMBEDDING_DIMENSIONS - 1).fill(0)]);
    },
  });
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  process.env = saved;
  setEmbedder(undefined);
  await h.close();
  await chat.close();
});


/** Its last attempt died with its worker, as a sweep finds it: `running`, attempts used up, lease long lapsed. */
const orphanLastAttempt = (id: string, now: Date) =>
  h.db.memory.update({ where: { id }, data: { processingStatus: "running", processingAttempts: 3, processingStartedAt: new Date(now.getTime() - 3_600_000) } });

/**
 * The database as a sweep sees it while the memory's worker renews its lease once, at the sweep's
 * first memory read: just before it (the row read is already renewed) or just after it (the row read
 * is stale, and the give-up that follows must notice).
 */
function renewingClient(id: string, when: "before its read" | "after its read") {
  let renewed = false;
  const renew = async () => {
    renewed = true;
    await h.db.memory.update({ where: { id }, data: { processingStartedAt: new Date() } });
  };
  const db = h.db.$extends({
    query: {
      memory: {
        async findFirst({ args, query }) {
          if (renewed) return query(args);
          if (when === "before its read") {
            await renew();
            return query(args);
          }
          const row = await query(args);
          if (row) await renew();
          return row;
        },
      },
    },
  }) as unknown as typeof h.db;
  return { db, renewed: () => renewed };
}

it("a kind, stability or content_type the client sets while the job runs is kept, not replaced by the job's guess", async () => {
  const res = await ann.post("/v1/memories", { content: "1. Freeze the release branch.\n2. Run the database migrations.\n3. Deploy the canary." });
  const id = res.body.data.id;
  const now = new Date();
  const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
  const embedded = new Promise<void>((resolve) => (embedding = resolve));
  const job = processMemory(h.db, claim, { maxAttempts: 3, retryBaseMs: 10 });
  await embedded; // classify has guessed; the chunks are being embedded
  const patched = await ann.patch(`/v1/memories/${id}`, { kind: "rationale", stability: "volatile", content_type: "chat" });
  expect(patched.status).toBe(200);
  release();
  expect(await job).toEqual({ status: "done" });
  const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
  expect(memory).toMatchObject({ processing_status: "done", kind: "rationale", stability: "volatile", content_type: "chat" });
});

it("run step by step (as Inngest does, each step writing as it goes), the job's guess still lands where the client set nothing", async () => {
  const res = await ann.post("/v1/memories", { content: "1. Drain the node.\n2. Patch the kernel.\n3. Uncordon the node." });
  const id = res.body.data.id;
  const now = new Date();
  const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
  embedding = () => setImmediate(() => release());
  for (const step of PROCESSING_STEPS) await step.run({ db: h.db, memory: claim.memory, now: () => new Date() });
  const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
  expect(memory).toMatchObject({ processing_status: "done", kind: "procedural", stability: "stable", summary: "Three steps of a release." });
});

it("a job that lost its memory to a takeover and then fails leaves the new owner's run alone", async () => {
  const res = await ann.post("/v1/memories", { content: "The boiler is serviced every October." });
  const id = res.body.data.id;
  const start = new Date();
  const first = (await claimMemory(h.db, id, { now: start, staleBefore: start, maxAttempts: 3, retryBaseMs: 10 }))!;
  // Its lease lapsed (a long pause): another process takes the memory over.
  const later = new Date(start.getTime() + 60_000);
  const second = (await claimMemory(h.db, id, { now: later, staleBefore: new Date(later.getTime() + 1), maxAttempts: 3, retryBaseMs: 10 }))!;
  expect(second.attempt).toBe(2);
  failEmbedding = true;
  try {
    // Then the first one fails, on its last attempt or not: neither back to pending (a third worker
    // could claim it beside the owner) nor failed (while the owner is still at work).
    for (const maxAttempts of [3, 1]) {
      expect(await processMemory(h.db, first, { maxAttempts, retryBaseMs: 10 })).toEqual({ status: "stale" });
      const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
      expect(row).toMatchObject({ processingStatus: "running", processingAttempts: 2, processingError: null });
    }
  } finally {
    failEmbedding = false;
  }
  embedding = () => setImmediate(() => release());
  expect(await processMemory(h.db, second, { maxAttempts: 3, retryBaseMs: 10 })).toEqual({ status: "done" });
});

it("a job taken over while it embeds does not complete the memory under its new owner", async () => {
  const res = await ann.post("/v1/memories", { content: "The compost heap is turned every fortnight." });
  const id = res.body.data.id;
  const start = new Date();
  const first = (await claimMemory(h.db, id, { now: start, staleBefore: start, maxAttempts: 3, retryBaseMs: 10 }))!;
  const embedded = new Promise<void>((resolve) => (embedding = resolve));
  // No lease renewal notices the takeover before the job's last steps (it checks every third of a lease).
  const job = processMemory(h.db, first, { maxAttempts: 3, retryBaseMs: 10 });
  await embedded;
  // Its lease lapsed meanwhile (a long pause): another process takes the memory over.
  const later = new Date(start.getTime() + 60_000);
  const second = (await claimMemory(h.db, id, { now: later, staleBefore: new Date(later.getTime() + 1), maxAttempts: 3, retryBaseMs: 10 }))!;
  expect(second.attempt).toBe(2);
  release();
  // Before, the first job wrote `done`, its chunks and memory.processed while the owner was at work.
  expect(await job).toEqual({ status: "stale" });
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "running", processingAttempts: 2, processedAt: null });
  expect(await h.db.event.count({ where: { type: "memory.processed", entityId: id } })).toBe(0);
  embedding = () => setImmediate(() => release());
  expect(await processMemory(h.db, second, { maxAttempts: 3, retryBaseMs: 10 })).toEqual({ status: "done" });
  expect(await h.db.event.count({ where: { type: "memory.processed", entityId: id } })).toBe(1);
});

it("a memory moved to another hub while its job runs: memory.processed goes to the hub it is in now, not the one it left", async () => {
  const team = (await ann.post("/v1/hubs", { name: "Workshop" })).body.data.id;
  const res = await ann.post("/v1/memories", { content: "The lathe belt was replaced in March." });
  const id = res.body.data.id;
  const from = res.body.data.hub_id;
  const now = new Date();
  const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
  const embedded = new Promise<void>((resolve) => (embedding = resolve));
  const job = processMemory(h.db, claim, { maxAttempts: 3, retryBaseMs: 10 });
  await embedded;
  expect((await ann.post("/v1/memories/batch-move", { ids: [id], hub_id: team })).body.data.moved).toBe(1);
  release();
  expect(await job).toEqual({ status: "done" });
  const events = await h.db.event.findMany({ where: { type: "memory.processed", entityId: id } });
  expect(events.map((event) => event.hubId)).toEqual([team]);
  expect(from).not.toBe(team);
});

it("a title the client sets while a link's page is read is kept, not replaced by the page's title", async () => {
  // A page that answers only when the test lets it: the job is held inside its extract step.
  let requested: () => void = () => {};
  let answer: () => void = () => {};
  const page = http.createServer((_req, res) => {
    requested();
    answer = () => res.writeHead(200, { "content-type": "text/html" }).end("<html><head><title>Tide tables</title></head><body><p>High water at noon.</p></body></html>");
  });
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  const port = (page.address() as AddressInfo).port;
  setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${port}`] });
  try {
    const res = await ann.post("/v1/memories", { content: `http://127.0.0.1:${port}/tides`, content_type: "link" });
    const id = res.body.data.id;
    const now = new Date();
    const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
    embedding = () => setImmediate(() => release());
    const fetched = new Promise<void>((resolve) => (requested = resolve));
    const job = processMemory(h.db, claim, { maxAttempts: 3, retryBaseMs: 10 });
    await fetched;
    expect((await ann.patch(`/v1/memories/${id}`, { title: "Harbour tides (mine)" })).status).toBe(200);
    answer();
    // A new title keeps the job's claim (the PATCH rewrites the chunks' lexical entries itself).
    expect(await job).toEqual({ status: "done" });
    const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
    expect(memory).toMatchObject({ processing_status: "done", title: "Harbour tides (mine)" });
    expect(memory.content).toContain("High water at noon");
  } finally {
    setLinkFetchPolicyForTests(undefined);
    await new Promise((resolve) => page.close(resolve));
  }
});

it("two processes that find the same memory's last attempt interrupted fail it once, with one notification", async () => {
  const res = await ann.post("/v1/memories", { content: "The well pump is primed before the first frost." });
  const id = res.body.data.id;
  // Its last attempt died with its worker: the row is `running`, attempts used up, lease long lapsed.
  await h.db.memory.update({ where: { id }, data: { processingStatus: "running", processingAttempts: 3, processingStartedAt: new Date(Date.now() - 3_600_000) } });
  const now = new Date();
  // Two sweeps (two processes on one database) come upon it at once.
  const claims = await Promise.all([0, 1].map(() => claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })));
  expect(claims).toEqual([null, null]);
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "failed", processingAttempts: 3 });
  // Before, both gave up on it: the owner was told twice, and memory.processed went out twice.
  expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(1);
  expect(await h.db.event.count({ where: { type: "memory.processed", entityId: id } })).toBe(1);
});

it("a give-up that loses to a lease renewed after its read leaves the job's chunks and their vectors alone", async () => {
  const res = await ann.post("/v1/memories", { content: "The gutters are cleared of leaves before the first frost." });
  const id = res.body.data.id;
  const start = new Date();
  const job = (await claimMemory(h.db, id, { now: start, staleBefore: start, maxAttempts: 3, retryBaseMs: 10 }))!;
  embedding = () => setImmediate(() => release());
  expect(await processMemory(h.db, job, { maxAttempts: 3, retryBaseMs: 10 })).toEqual({ status: "done" });
  const vectors = async () => (await h.database.sql.query<{ n: number; v: number }>(`SELECT count(*)::int AS n, count(embedding)::int AS v FROM chunks WHERE memory_id = $1`, [id]))[0];
  expect(await vectors()).toEqual({ n: 1, v: 1 });
  // Its last attempt looks orphaned to a sweep; the worker renews its lease right after the sweep's read.
  const now = new Date();
  await orphanLastAttempt(id, now);
  const renewing = renewingClient(id, "after its read");
  expect(await claimMemory(renewing.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).toBeNull();
  expect(renewing.renewed()).toBe(true);
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "running", processingError: null });
  // Before, the give-up rewrote the chunks without vectors before its fenced update matched nothing.
  expect(await vectors()).toEqual({ n: 1, v: 1 });
});

it("a give-up whose fallback chunks cannot be written still records the failure (and tells the owner)", async () => {
  const res = await ann.post("/v1/memories", { content: "The hedges are trimmed before the first frost." });
  const id = res.body.data.id;
  const now = new Date();
  await orphanLastAttempt(id, now);
  // The database refuses this memory's chunks (as whatever failed its index step might).
  await h.database.sql.exec(`
    CREATE FUNCTION engram_test_refuse_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.memory_id = '${id}'::uuid THEN RAISE EXCEPTION 'chunk refused'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER engram_test_refuse_chunks BEFORE INSERT ON chunks FOR EACH ROW EXECUTE FUNCTION engram_test_refuse_chunks();`);
  try {
    expect(await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).toBeNull();
  } finally {
    await h.database.sql.exec(`DROP TRIGGER engram_test_refuse_chunks ON chunks; DROP FUNCTION engram_test_refuse_chunks();`);
  }
  // Before, the chunks' error rolled the failure back: the row stayed running, attempts used up, for good.
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "failed" });
  expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(1);
  expect(await h.db.chunk.count({ where: { memoryId: id } })).toBe(0);
});

it("a give-up whose chunks are refused deletes the chunks stored before (an earlier version's text)", async () => {
  const res = await ann.post("/v1/memories", { content: "The shutters are closed before the first frost." });
  const id = res.body.data.id;
  await replaceChunks(h.db, { id, hubId: res.body.data.hub_id }, [{ position: 0, content: "An earlier version: the shutters stay open.", headingChain: "", tokenCount: 8, embedding: null, gloss: "" }]);
  const now = new Date();
  await orphanLastAttempt(id, now);
  await h.database.sql.exec(`
    CREATE FUNCTION engram_test_refuse_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.memory_id = '${id}'::uuid THEN RAISE EXCEPTION 'chunk refused'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER engram_test_refuse_chunks BEFORE INSERT ON chunks FOR EACH ROW EXECUTE FUNCTION engram_test_refuse_chunks();`);
  try {
    expect(await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).toBeNull();
  } finally {
    await h.database.sql.exec(`DROP TRIGGER engram_test_refuse_chunks ON chunks; DROP FUNCTION engram_test_refuse_chunks();`);
  }
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "failed" });
  // Before, the chunkless failure kept them: recall found the memory by text it no longer holds.
  expect(await h.db.chunk.count({ where: { memoryId: id } })).toBe(0);
});

it("a give-up that fails for another reason than its chunks records nothing; the next sweep fails the memory with its chunks", async () => {
  const res = await ann.post("/v1/memories", { content: "The water main is shut off before the first frost." });
  const id = res.body.data.id;
  const now = new Date();
  await orphanLastAttempt(id, now);
  // The give-up's notification fails once, as a deadlock or a lost connection would fail its transaction.
  await h.database.sql.exec(`
    CREATE SEQUENCE engram_test_once;
    CREATE FUNCTION engram_test_fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.source_id = '${id}' AND nextval('engram_test_once') = 1 THEN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER engram_test_fail_once BEFORE INSERT ON notifications FOR EACH ROW EXECUTE FUNCTION engram_test_fail_once();`);
  try {
    // Before, any error of the give-up fell back to no chunks: the memory ended failed without them, for good.
    await expect(claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).rejects.toThrow();
    expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "running" });
    expect(await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).toBeNull();
  } finally {
    await h.database.sql.exec(`DROP TRIGGER engram_test_fail_once ON notifications; DROP FUNCTION engram_test_fail_once(); DROP SEQUENCE engram_test_once;`);
  }
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "failed" });
  expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(1);
  expect(await h.db.chunk.count({ where: { memoryId: id } })).toBe(1);
});

it("a memory whose last attempt is still at work (its lease renewed after the sweep read it) is not failed under it", async () => {
  const res = await ann.post("/v1/memories", { content: "The rain barrels are emptied before the first frost." });
  const id = res.body.data.id;
  const now = new Date();
  await orphanLastAttempt(id, now);
  // The sweep reads the row as orphaned; its owner renews the lease right after (the first statement
  // of the give-up that follows the read is where it lands).
  const renewing = renewingClient(id, "before its read");
  expect(await claimMemory(renewing.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 })).toBeNull();
  expect(renewing.renewed()).toBe(true);
  expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ processingStatus: "running", processingAttempts: 3, processingError: null });
  expect(await h.db.notification.count({ where: { kind: "memory_processing_failed", sourceId: id } })).toBe(0);
});

it("a chat model's summary longer than a summary may be is cut to 300 characters, not a failed attempt", async () => {
  const res = await ann.post("/v1/memories", { content: "The orchard ladder is inspected before every harvest." });
  const id = res.body.data.id;
  const wordy = Array.from({ length: 40 }, (_, i) => `Sentence ${i} says the ladder is inspected.`).join(" ");
  const answer = chat.answer;
  chat.answer = (schema, body) => (schema === "memory_summary" ? { summary: wordy } : answer(schema, body));
  try {
    const now = new Date();
    const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
    embedding = () => setImmediate(() => release());
    // Before, the reply failed the schema's 400-character bound: the attempt failed, and so did every retry.
    expect(await processMemory(h.db, claim, { maxAttempts: 3, retryBaseMs: 10 })).toEqual({ status: "done" });
  } finally {
    chat.answer = answer;
  }
  const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
  expect(memory.processing_status).toBe("done");
  expect(memory.summary.length).toBeLessThanOrEqual(300);
  expect(memory.summary.startsWith("Sentence 0 says the ladder is inspected.")).toBe(true);
});

it("a job whose content was edited away neither keeps the new version's claim alive nor runs on: its lease is lost", async () => {
  const res = await ann.post("/v1/memories", { content: "The hedge is cut after the birds have nested." });
  const id = res.body.data.id;
  const now = new Date();
  const first = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
  const lease = new JobLease(async () => h.db, 30_000);
  try {
    const signal = lease.hold(id, first.attempt, first.memory.version);
    // The content changes (a new version, attempts back to 0), and another process claims the new
    // version: attempt 1 again, like the first job's.
    expect((await ann.patch(`/v1/memories/${id}`, { content: "The hedge is cut in late August." })).status).toBe(200);
    const second = (await claimMemory(h.db, id, { now: new Date(), staleBefore: new Date(), maxAttempts: 3, retryBaseMs: 10 }))!;
    expect(second).toMatchObject({ attempt: first.attempt, memory: { version: first.memory.version + 1 } });
    const claimed = (await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStartedAt;
    await new Promise((resolve) => setTimeout(resolve, 5));
    await lease.renew();
    // Before, the renewal matched the other process's claim (same attempt number): it renewed a lease
    // that was not its own (a dead owner's memory then waited for this job to end) and ran on to the end.
    expect(signal.aborted).toBe(true);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).processingStartedAt).toEqual(claimed);
  } finally {
    lease.stop();
  }
});

it("a tag edit that read a link while its page was read does not put the finished memory back to processing", async () => {
  // The job's writes keep updated_at (they are not the client's edits), so the PATCH's updated_at check
  // does not see them: the PATCH wrote back every field it had read, state `processing` among them, and
  // the memory, already done, stayed `processing` for good.
  const page = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<html><head><title>Ferry times</title></head><body><p>Every hour.</p></body></html>"));
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  const port = (page.address() as AddressInfo).port;
  setLinkFetchPolicyForTests({ allow: [`127.0.0.1:${port}`] });
  try {
    const id = (await ann.post("/v1/memories", { content: `http://127.0.0.1:${port}/ferry`, content_type: "link" })).body.data.id as string;
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).state).toBe("processing");
    embedding = () => setImmediate(() => release());
    const finish = async () => {
      const now = new Date();
      const claim = (await claimMemory(h.db, id, { now, staleBefore: now, maxAttempts: 3, retryBaseMs: 10 }))!;
      expect(await processMemory(h.db, claim, { maxAttempts: 3, retryBaseMs: 10 })).toEqual({ status: "done" });
    };
    await updateMemory(sessionContext(h, ann, changedBefore(h.db, ["$transaction"], finish)), id, { tags: ["ferry"] });
    expect(await h.db.memory.findUniqueOrThrow({ where: { id } })).toMatchObject({ state: "active", processingStatus: "done", tags: ["ferry"], title: "Ferry times" });
  } finally {
    setLinkFetchPolicyForTests(undefined);
    await new Promise((resolve) => page.close(resolve));
  }
});

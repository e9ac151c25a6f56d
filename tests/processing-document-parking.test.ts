import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { DOCUMENT_JOBS_AT_ONCE, EmbeddedRunner } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";
import { TricklingStore } from "./support/trickling-store.ts";

/**
 * Documents are read one at a time per process, and a document job waited for that turn inside one of
 * the runner's workers, as images did before they were parked. A bulk import of PDFs took all 16
 * workers, and text pushed after it waited until the documents ahead of it were read one by one.
 * Now at most DOCUMENT_JOBS_AT_ONCE document jobs hold workers; the others wait unclaimed, parked.
 */


let h: Harness;
let ann: Client;
let dir: string;
let store: TricklingStore;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "engram-document-parking-"));
  store = new TricklingStore(dir);
  setBlobStore(store);
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  setBlobStore(undefined);
  await h?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A text file memory whose bytes trickle from storage (a download that holds the documents' turn). */
async function document(text: string, trickle = true): Promise<string> {
  const bytes = Buffer.from(text);
  const intent = (await ann.post("/v1/uploads", { filename: "report.txt", content_type: "text/plain", size_bytes: bytes.length })).body.data;
  expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(bytes) }))).status).toBe(200);
  const created = await ann.post("/v1/memories", { file_ref: intent.file_ref });
  expect(created.status).toBe(201);
  if (trickle) store.trickling.add(intent.file_ref.object_key);
  return created.body.data.id;
}

async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const status = async (id: string) => (await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true } })).processingStatus;

describe("the embedded runner's document jobs", () => {
  it("a bulk import of documents holds at most DOCUMENT_JOBS_AT_ONCE workers: text pushed after it is processed promptly", async () => {
    const config = processingConfig();
    const documents: string[] = [];
    for (let i = 0; i < config.concurrency + 4; i++) documents.push(await document(`Quarterly report ${i}: the numbers, from a slow bucket.`));
    const r = new EmbeddedRunner({ ...config, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      for (const id of documents) r.enqueue(id);
      await until("a document is being read", async () => (await h.db.memory.count({ where: { id: { in: documents }, processingStatus: "running" } })) > 0, 10_000);
      const text = (await ann.post("/v1/memories", { content: "The loading dock closes at six on Fridays." })).body.data.id as string;
      r.enqueue(text);
      // The first document's download alone holds the turn for ENGRAM_EXTRACT_DOWNLOAD_MAX_MS (two minutes).
      await until("the text memory is done", async () => (await status(text)) === "done", 45_000);
      expect(await h.db.memory.count({ where: { id: { in: documents }, processingStatus: "running" } })).toBeLessThanOrEqual(DOCUMENT_JOBS_AT_ONCE);
      expect(r.size.active).toBeLessThanOrEqual(DOCUMENT_JOBS_AT_ONCE);
      expect(r.size.queued).toBe(documents.length - DOCUMENT_JOBS_AT_ONCE);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 90_000);

  it("parked documents are all read in the end, never more than DOCUMENT_JOBS_AT_ONCE of them claimed and not read yet at once", async () => {
    // A document gives its turn back once its text is written: claimed and read, it no longer counts.
    const documents: string[] = [];
    for (let i = 0; i < 6; i++) documents.push(await document(`Meeting notes ${i}: the roof repair is booked for spring.`, false));
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    let most = 0;
    try {
      for (const id of documents) r.enqueue(id);
      await until(
        "every document is done",
        async () => {
          most = Math.max(most, await h.db.memory.count({ where: { id: { in: documents }, processingStatus: "running", extractedAt: null } }));
          return (await h.db.memory.count({ where: { id: { in: documents }, processingStatus: "done" } })) === documents.length;
        },
        45_000,
      );
      expect(most).toBeLessThanOrEqual(DOCUMENT_JOBS_AT_ONCE);
      expect(r.stats.done).toBe(documents.length);
      expect(r.size).toEqual({ queued: 0, active: 0 });
    } finally {
      r.stop();
      await r.idle();
    }
  }, 60_000);
  it("a document gives its turn back once its text is read: the next documents are read while its later steps wait", async () => {
    // A document held its turn for its whole job (classification, embedding, summary), not just the read:
    // two documents waiting for the model kept every other document parked, the reader idle.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    const held: ServerResponse[] = [];
    const answer = (res: ServerResponse, content: string) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 0, model: "gpt-test", choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }] }));
    };
    const classification = JSON.stringify({ kind: "semantic", stability: "stable" });
    const server = createServer(async (req, res) => {
      let raw = "";
      for await (const chunk of req) raw += chunk;
      const classify = JSON.parse(raw).response_format?.json_schema?.name === "memory_classification";
      if (classify && raw.includes("HELD-AFTER-READING")) return void held.push(res);
      answer(res, classify ? classification : JSON.stringify({ summary: "A document." }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const saved = { ...process.env };
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-test", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
    const first = [await document("HELD-AFTER-READING: the budget, part one.", false), await document("HELD-AFTER-READING: the budget, part two.", false)];
    const next = [await document("The canteen menu for the week.", false), await document("The cleaning rota for the stairs.", false)];
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      for (const id of first) r.enqueue(id);
      await until("both documents are read and wait for the model", async () => held.length === DOCUMENT_JOBS_AT_ONCE, 10_000);
      for (const id of next) r.enqueue(id);
      await until("the next documents are done", async () => (await h.db.memory.count({ where: { id: { in: next }, processingStatus: "done" } })) === next.length, 10_000);
      for (const id of first) expect(await status(id)).toBe("running");
    } finally {
      for (const res of held.splice(0)) answer(res, classification);
      await until("the first documents are done", async () => (await h.db.memory.count({ where: { id: { in: first }, processingStatus: "done" } })) === first.length, 10_000);
      r.stop();
      await r.idle();
      process.env = saved;
      await new Promise((resolve) => server.close(resolve));
    }
  }, 60_000);

  it("documents a sweep left in the database while some were parked are read once the parked ones run low, also when one is written again as something else", async () => {
    // The sweeps leave unread documents off their pages while DOCUMENT_JOBS_AT_ONCE or more are parked. When
    // a parked one was written again (no file to read now) and queued, nothing asked for a sweep, so the documents
    // left in the database waited for the next periodic one (ENGRAM_PROCESSING_SWEEP_SECONDS).
    process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS = "20000";
    // The earlier tests' slow documents are set aside: a sweep would otherwise read them first.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    const [reading, ready] = [await document("Budget draft: from a slow bucket."), await document("Budget final: from a slow bucket.")];
    const [parked, alsoParked, left] = [await document("Office move checklist.", false), await document("Parking permit list.", false), await document("Fire drill schedule.", false)];
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      r.enqueue(reading);
      r.enqueue(ready);
      await until("two documents hold the document jobs", async () => (await h.db.memory.count({ where: { id: { in: [reading, ready] }, processingStatus: "running" } })) === 2, 10_000);
      r.enqueue(parked);
      r.enqueue(alsoParked);
      await until("two documents are parked", async () => r.size.queued === 2 && r.size.active === 2, 10_000);
      // A sweep while DOCUMENT_JOBS_AT_ONCE are parked leaves the next document (written by another process, say) in the database.
      await r.sweep();
      expect(r.size.queued).toBe(2);
      expect(await status(left)).toBe("pending");
      // The parked one is written again: its text is read, no file waits (as a PATCH of another process could leave it).
      await h.db.memory.update({ where: { id: parked }, data: { extractedAt: new Date(), content: "Office move checklist: boxes, labels, keys." } });
      r.enqueue(parked);
      await until("the rewritten memory is done", async () => (await status(parked)) === "done", 20_000);
      // The document left in the database is parked again by a refill sweep, not at the next periodic one a minute on.
      await until("the document left in the database is back in the runner", async () => r.size.queued === 2, 5_000);
      expect(await status(left)).toBe("pending");
    } finally {
      delete process.env.ENGRAM_EXTRACT_DOWNLOAD_MAX_MS;
      r.stop();
      await r.idle();
    }
  }, 60_000);
});

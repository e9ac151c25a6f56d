import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { IMAGE_READS_AT_ONCE, readTurnOf } from "@/lib/extraction/extract-memory-text.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { EmbeddedRunner, findPendingMemories } from "@/lib/processing/embedded-runner.ts";
import { processingConfig } from "@/lib/processing/processing-config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { makePng } from "./support/make-files.ts";
import { dispatch } from "./support/router.ts";
import { backdateMemories } from "./support/backdate-memories.ts";

/**
 * The embedded runner parks image jobs that come up while IMAGE_READS_AT_ONCE image turns are taken.
 * An image written again while its job ran (and then parked) was put back in the queue as well: one id
 * in both, so it was started twice, and the copy that lost the claim gave back the image turn its twin
 * still held. Another image job then started (claimed, waiting in a worker) while three image turns
 * were taken: what parking exists to prevent.
 */

let server: Server;
/** Image requests held unanswered, in the order they came. */
const heldImages: ServerResponse[] = [];
/** Text requests naming HOLD held unanswered (a text job that keeps its worker). */
const heldText: ServerResponse[] = [];
let heldTextSeen = false;
let heldAtStopSeen = false;
let heldOrphanSlotSeen = false;
let h: Harness;
let ann: Client;
let blobDir: string;
const saved = { ...process.env };

function answer(res: ServerResponse, model: string, content: string) {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      id: "chatcmpl-1",
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    }),
  );
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw || "{}");
    const name = body.response_format?.json_schema?.name;
    const parts = body.messages?.flatMap((m: { content: unknown }) => (Array.isArray(m.content) ? m.content : [])) ?? [];
    const image = parts.some((p: { type: string }) => p.type === "image_url");
    if (image) return void heldImages.push(res);
    if (raw.includes("HOLD-AT-STOP") && !heldAtStopSeen) {
      heldAtStopSeen = true;
      return void heldText.push(res);
    }
    if (raw.includes("HOLD-ORPHAN-SLOT") && !heldOrphanSlotSeen) {
      heldOrphanSlotSeen = true;
      return void heldText.push(res);
    }
    if (raw.includes("HOLD-THIS-JOB") && !heldTextSeen) {
      heldTextSeen = true;
      return void heldText.push(res);
    }
    answer(res, body.model, name === "memory_classification" ? JSON.stringify({ kind: "semantic", stability: "stable" }) : JSON.stringify({ summary: "A note." }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-test-vision", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-parking-blobs-"));
  setBlobStore(new LocalBlobStore(blobDir));
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  for (const res of [...heldImages.splice(0), ...heldText.splice(0)]) res.destroy();
  process.env = saved;
  setBlobStore(undefined);
  await h?.close();
  await new Promise((r) => server.close(r));
  rmSync(blobDir, { recursive: true, force: true });
});
/** A test's runner stopped and drained, and whatever answers the fake model still holds let go. */
async function stopRunner(r: EmbeddedRunner): Promise<void> {
  r.stop();
  await r.idle();
  for (const res of [...heldImages.splice(0), ...heldText.splice(0)]) res.destroy();
}
const releaseImage = () => answer(heldImages.shift()!, "gpt-test-vision", "Whiteboard: the on-call rotation swaps every Thursday at noon.");

async function uploadImage(width: number, by: Client = ann): Promise<string> {
  const png = makePng(width, 10);
  const intent = (await by.post("/v1/uploads", { filename: "board.png", content_type: "image/png", size_bytes: png.length })).body.data;
  expect((await dispatch(new Request(intent.upload_url, { method: "PUT", headers: intent.headers, body: new Uint8Array(png) }))).status).toBe(200);
  const created = await by.post("/v1/memories", { file_ref: intent.file_ref });
  expect(created.status).toBe(201);
  return created.body.data.id;
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const status = async (id: string) => (await h.db.memory.findUniqueOrThrow({ where: { id }, select: { processingStatus: true } })).processingStatus;

describe("the embedded runner's parked image jobs", () => {
  it("an image written again while its job parks is held once: no image job starts while IMAGE_READS_AT_ONCE image turns are taken", async () => {
    const images: string[] = [];
    for (const width of [21, 22, 23, 24, 25]) images.push(await uploadImage(width));
    const [first, second, third, again, later] = images as [string, string, string, string, string];
    const text = (await ann.post("/v1/memories", { content: "HOLD-THIS-JOB: the freezer inventory is counted on Mondays." })).body.data.id as string;
    const r = new EmbeddedRunner({ ...processingConfig(), concurrency: IMAGE_READS_AT_ONCE + 1, sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      // Three images take the three image turns and wait for the model.
      for (const id of [first, second, third]) r.enqueue(id);
      await until("three images are at the model", () => heldImages.length === IMAGE_READS_AT_ONCE);
      // The fourth image starts in the last worker and is written again while it runs (a second enqueue);
      // a text job comes up behind it and keeps that worker once the image parks.
      r.enqueue(again);
      r.enqueue(again);
      r.enqueue(text);
      await until("the text job is at the model", () => heldText.length === 1);
      // One image turn frees: the parked image takes it.
      releaseImage();
      await until("the fourth image is at the model", () => heldImages.length === IMAGE_READS_AT_ONCE);
      expect(await status(again)).toBe("running");
      // The text job ends; its worker took the same image from the queue too (it was queued and parked), a second run.
      answer(heldText.shift()!, "gpt-test-vision", JSON.stringify({ kind: "semantic", stability: "stable" }));
      await until("the text job is done", async () => (await status(text)) === "done");
      // Three image turns are taken (second, third, again): a new image waits unclaimed, parked.
      r.enqueue(later);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(heldImages).toHaveLength(IMAGE_READS_AT_ONCE);
      expect(await status(later)).toBe("pending");
      // Everything is read in the end, each image once.
      await until(
        "every image is done",
        async () => {
          while (heldImages.length > 0) releaseImage();
          return (await h.db.memory.count({ where: { id: { in: images }, processingStatus: "done" } })) === images.length;
        },
        30_000,
      );
      for (const id of images) expect(await status(id)).toBe("done");
      expect(r.stats.done).toBe(images.length + 1);
    } finally {
      r.stop();
      await r.idle();
    }
  }, 90_000);

  it("a sweep page full of parked images does not keep newer memories waiting behind them", async () => {
    // Parked images are pending rows: the sweep's page (200, oldest first) came back full of them, nothing
    // on it could be queued, and the backlog after them (text pushed while the runner was busy) was
    // reached only once the images, three at a time at the model's pace, were read.
    const first = await uploadImage(26);
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: first } });
    const copies = Array.from({ length: 205 }, (_, i) => ({ ...row, id: randomUUID(), updatedAt: new Date(row.updatedAt.getTime() + i + 1) }));
    await h.db.memory.createMany({ data: copies as Prisma.MemoryCreateManyInput[] });
    const text = (await ann.post("/v1/memories", { content: "The parking garage opens at seven on weekdays." })).body.data.id as string;
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      r.start();
      await until("the text memory is done while the images wait for the model", async () => (await status(text)) === "done", 30_000);
      expect(heldImages.length).toBeLessThanOrEqual(IMAGE_READS_AT_ONCE);
    } finally {
      await stopRunner(r);
    }
  }, 60_000);

  it("a memory written again while its job runs is not queued once the runner has stopped", async () => {
    // stop() emptied the queue, but the id a write had marked to run again went back into it when its
    // job ended: a stopped runner still reported (and held) queued work.
    const text = (await ann.post("/v1/memories", { content: "HOLD-AT-STOP: the boiler is serviced every October." })).body.data.id as string;
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      r.enqueue(text);
      await until("the job is at the model", async () => heldText.length === 1);
      r.enqueue(text);
      r.stop();
      answer(heldText.shift()!, "gpt-test-vision", JSON.stringify({ kind: "semantic", stability: "stable" }));
      await r.idle();
      await until("the job has ended", async () => r.size.active === 0);
      expect(r.size).toEqual({ queued: 0, active: 0 });
    } finally {
      r.stop();
    }
  }, 30_000);
  it("parked images never take the queue past its bound, and text written while they wait is processed", async () => {
    // Every unread image on a sweep page was queued and then parked, without a bound: an import of 40,000
    // photos parked them all, past MAX_QUEUED_JOBS, and each sweep sent every parked id as a parameter of
    // its query (past 32,766 of them every sweep failed), so text in the database backlog waited for good.
    const first = await uploadImage(27);
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: first } });
    const copies = Array.from({ length: 80 }, (_, i) => ({ ...row, id: randomUUID(), updatedAt: new Date(row.updatedAt.getTime() + i + 1) }));
    await h.db.memory.createMany({ data: copies as Prisma.MemoryCreateManyInput[] });
    const maxQueued = 20;
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, maxQueued, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    let largest = 0;
    const bounded = () => {
      largest = Math.max(largest, r.size.queued);
      return true;
    };
    const sampler = setInterval(bounded, 5);
    try {
      r.start();
      await until("three images are at the model", () => bounded() && heldImages.length === IMAGE_READS_AT_ONCE);
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      // Written afterwards, as a write's hook enqueues it.
      const text = (await ann.post("/v1/memories", { content: "The loading dock closes at five on Fridays." })).body.data.id as string;
      r.enqueue(text);
      await until("the text memory is done while the images wait for the model", async () => bounded() && (await status(text)) === "done", 30_000);
      expect(heldImages.length).toBeLessThanOrEqual(IMAGE_READS_AT_ONCE);
      expect(largest).toBeLessThanOrEqual(maxQueued);
    } finally {
      clearInterval(sampler);
      await stopRunner(r);
    }
  }, 60_000);

  it("an image left in the database is read before newer images that keep arriving while some are parked", async () => {
    // Sweeps read a turn's files left in the database only once none of that turn were parked, while a
    // new upload parked whenever the parked set had room: photos uploaded at the vision model's pace kept
    // it from emptying, and the older photos in the database waited for good, the newest read first.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    const older: string[] = [];
    for (let i = 0; i < 14; i++) older.push(await uploadImage(40 + i));
    // A quarter of 40: at most 10 parked images, so of the 14 three are at the model, ten parked, one left in the database.
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, maxQueued: 40, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    const newer: string[] = [];
    try {
      r.start();
      await until("three images are at the model and ten parked", () => heldImages.length === IMAGE_READS_AT_ONCE && r.size.queued === 10);
      expect(await h.db.memory.count({ where: { id: { in: older }, processingStatus: "pending" } })).toBe(11);
      // A new photo comes each time the model answers one.
      for (let round = 0; round < 16; round++) {
        releaseImage();
        const id = await uploadImage(60 + round);
        newer.push(id);
        r.enqueue(id);
        await until("an image takes the freed turn", () => heldImages.length === IMAGE_READS_AT_ONCE, 10_000);
      }
      // Sixteen turns were freed: the thirteen older images parked or left in the database came first.
      expect(await h.db.memory.count({ where: { id: { in: older }, processingStatus: "pending" } })).toBe(0);
      expect(await h.db.memory.count({ where: { id: { in: newer }, processingStatus: "pending" } })).toBeGreaterThanOrEqual(newer.length - 5);
    } finally {
      await stopRunner(r);
    }
  }, 90_000);

  it("an orphaned image job keeps its place ahead of the queue while images wait in the database", async () => {
    // A dead process's image job was put first, but then left to the database like any new image while
    // images waited there (and those are left off the sweeps' pages): each sweep put it first again and
    // left it again, so it waited until every image in the database had been read.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    const older: string[] = [];
    for (let i = 0; i < 14; i++) older.push(await uploadImage(80 + i));
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, maxQueued: 40, db: async () => h.db, exclusiveDatabase: false });
    try {
      r.start();
      // Three at the model, ten parked, one left in the database.
      await until("three images are at the model and ten parked", () => heldImages.length === IMAGE_READS_AT_ONCE && r.size.queued === 10);
      const orphan = await uploadImage(99);
      await backdateMemories(h.db, orphan, { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000) });
      await r.sweep();
      await new Promise((resolve) => setTimeout(resolve, 500));
      releaseImage();
      await until("an image takes the freed turn", () => heldImages.length === IMAGE_READS_AT_ONCE, 10_000);
      expect(await h.db.memory.findUniqueOrThrow({ where: { id: orphan }, select: { processingStatus: true, processingAttempts: true } })).toEqual({
        processingStatus: "running",
        processingAttempts: 2,
      });
      expect(r.size.queued).toBeLessThanOrEqual(10);
    } finally {
      await stopRunner(r);
    }
  }, 90_000);

  it("an orphaned image job written again before it ran loses its place ahead: it waits behind the images already waiting", async () => {
    // The orphan mark stayed on an id written again while it waited in the queue's first lane: the new
    // write was no dead process's job, yet it was parked ahead of every image waiting (not behind those
    // in the database) and took the next turn.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    for (let i = 0; i < 14; i++) await uploadImage(160 + i);
    await ann.post("/v1/memories", { content: "HOLD-ORPHAN-SLOT: the freezer inventory is counted on Mondays." });
    const r = new EmbeddedRunner({ ...processingConfig(), concurrency: IMAGE_READS_AT_ONCE + 1, sweepMs: 60_000, maxQueued: 40, db: async () => h.db, exclusiveDatabase: false });
    try {
      r.start();
      // Every worker taken: three images at the model, a text job held there; ten images parked.
      await until("three images and a text job are at the model, ten images parked", () => heldImages.length === IMAGE_READS_AT_ONCE && heldText.length === 1 && r.size.queued === 10);
      const orphan = await uploadImage(199);
      await backdateMemories(h.db, orphan, { processingStatus: "running", processingAttempts: 1, processingStartedAt: new Date(Date.now() - 3_600_000) });
      await r.sweep();
      // Written again (as a write resets it) while it waits first in the queue, and enqueued as every write is.
      await backdateMemories(h.db, orphan, { processingStatus: "pending", processingAttempts: 0, processingStartedAt: null, version: { increment: 1 }, updatedAt: new Date() });
      r.enqueue(orphan, ann.personalHubId);
      answer(heldText.shift()!, "gpt-test-vision", JSON.stringify({ kind: "semantic", stability: "stable" }));
      // The text job ends; the orphan takes its worker, finds the image turns taken and waits, unclaimed.
      await until("only the three images run", () => r.size.active === IMAGE_READS_AT_ONCE, 20_000);
      releaseImage();
      await until("an image takes the freed turn", () => heldImages.length === IMAGE_READS_AT_ONCE, 10_000);
      expect(await status(orphan)).toBe("pending");
    } finally {
      await stopRunner(r);
    }
  }, 90_000);

  it("an image pushed into another hub is not left behind one hub's photo import", async () => {
    // Parked images were one FIFO over every hub, and past the parked bound a new image waited in the
    // database behind the rest: another hub's photo waited until a whole photo import had been read.
    await h.db.memory.updateMany({ where: { processingStatus: { in: ["pending", "running"] } }, data: { processingStatus: "failed" } });
    const bob = await h.user("Bob");
    for (let i = 0; i < 14; i++) await uploadImage(120 + i);
    const r = new EmbeddedRunner({ ...processingConfig(), sweepMs: 60_000, maxQueued: 40, db: async () => h.db, exclusiveDatabase: h.database.kind === "pglite" });
    try {
      r.start();
      await until("three images are at the model and ten parked", () => heldImages.length === IMAGE_READS_AT_ONCE && r.size.queued === 10);
      const theirs = await uploadImage(140, bob);
      r.enqueue(theirs, bob.personalHubId);
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Two turns free: Ann's photos and Bob's take them in turn.
      for (let i = 0; i < 2; i++) {
        releaseImage();
        await until("an image takes the freed turn", () => heldImages.length === IMAGE_READS_AT_ONCE, 10_000);
      }
      expect(await status(theirs)).toBe("running");
      expect(r.size.queued).toBeLessThanOrEqual(10);
    } finally {
      await stopRunner(r);
    }
  }, 90_000);

  it("a sweep can leave unread images (or documents) off its page by a condition, not by a list of their ids", async () => {
    const image = await uploadImage(28);
    const text = (await ann.post("/v1/memories", { content: "The mail room sorts parcels by floor." })).body.data.id as string;
    const read = (await ann.post("/v1/memories", { content: "An image whose text was read already." })).body.data.id as string;
    const imageRow = await h.db.memory.findUniqueOrThrow({ where: { id: image } });
    await h.db.memory.update({ where: { id: read }, data: { fileRef: imageRow.fileRef as Prisma.InputJsonValue, extractedAt: new Date() } });
    const doc = (await ann.post("/v1/memories", { content: "A document not read yet." })).body.data.id as string;
    await h.db.memory.update({ where: { id: doc }, data: { fileRef: { ...(imageRow.fileRef as Record<string, unknown>), content_type: "application/pdf", filename: "a.pdf" } } });
    const pending = async (skipUnread: ("image" | "document")[]) =>
      new Set(await findPendingMemories(h.db, { staleBefore: new Date(0), retryBaseMs: 2_000, limit: 10_000, skipUnread, now: new Date(Date.now() + 60_000) }));
    const all = await pending([]);
    for (const id of [image, text, read, doc]) expect(all.has(id)).toBe(true);
    const noImages = await pending(["image"]);
    expect([image, text, read, doc].map((id) => noImages.has(id))).toEqual([false, true, true, true]);
    const noDocuments = await pending(["document"]);
    expect([image, text, read, doc].map((id) => noDocuments.has(id))).toEqual([true, true, true, false]);
  });

  it("a file with no content_type is a document to the sweep's condition, as it is to readTurnOf", async () => {
    // readTurnOf calls it a document, but in SQL NOT (content_type LIKE 'image/%') is NULL for a missing
    // key: while images were parked such a row was left off every sweep, and while documents were not.
    const imageRow = await h.db.memory.findUniqueOrThrow({ where: { id: await uploadImage(29) } });
    const untyped = (await ann.post("/v1/memories", { content: "A file whose type was never recorded." })).body.data.id as string;
    const { content_type: _, ...ref } = imageRow.fileRef as Record<string, unknown>;
    const row = await h.db.memory.update({ where: { id: untyped }, data: { fileRef: ref as Prisma.InputJsonValue } });
    expect(readTurnOf(row)).toBe("document");
    const pending = async (skipUnread: ("image" | "document")[]) =>
      new Set(await findPendingMemories(h.db, { staleBefore: new Date(0), retryBaseMs: 2_000, limit: 10_000, skipUnread, now: new Date(Date.now() + 60_000) }));
    expect((await pending(["image"])).has(untyped)).toBe(true);
    expect((await pending(["document"])).has(untyped)).toBe(false);
  });
});

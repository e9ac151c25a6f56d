import { afterAll, beforeAll, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { EMBEDDING_DIMENSIONS, setEmbedder } from "@/lib/ai/embedder.ts";
import { reembedMemories } from "@/lib/processing/reembed-memories.ts";
import { backgroundRunner, startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";

let h: Harness;
let ann: Client;
const savedModelDir = process.env.ENGRAM_MODEL_DIR;

beforeAll(async () => {
  // No model files: the service must still run, lexical-only.
  process.env.ENGRAM_MODEL_DIR = "/nonexistent/engram-models";
  setEmbedder(undefined);
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  if (savedModelDir === undefined) delete process.env.ENGRAM_MODEL_DIR;
  else process.env.ENGRAM_MODEL_DIR = savedModelDir;
  setEmbedder(undefined);
  await h.close();
});

const vectors = (id: string) =>
  h.database.sql.query<{ n: number; with_vector: number }>(`SELECT count(*)::int AS n, count(embedding)::int AS with_vector FROM chunks WHERE memory_id = $1`, [id]);

it("without a model, memories still process (lexical-only) and health says why; reembed fills the vectors later", async () => {
  const ids: string[] = [];
  for (const content of ["# Backups\n\nNightly snapshots are kept for 30 days.", "Our on-call rotation changes every Monday at 10:00."]) {
    const res = await ann.post("/v1/memories", { content });
    expect(res.status).toBe(201);
    ids.push(res.body.data.id);
  }
  await backgroundRunner()!.idle();
  for (const id of ids) {
    const memory = (await ann.get(`/v1/memories/${id}`)).body.data;
    expect(memory).toMatchObject({ processing_status: "done", processing_error: null });
    expect(memory.summary).not.toBe("");
    expect(await vectors(id)).toEqual([{ n: 1, with_vector: 0 }]);
  }
  const health = (await h.anonymous.get("/v1/health")).body.data;
  expect(health.embeddings).toMatchObject({ provider: "local", model: "Xenova/all-MiniLM-L6-v2", status: "unavailable" });
  // Anyone may call health: it says what to do, never where the server keeps its files.
  expect(health.embeddings.reason).toBe("the local model files are not installed (npm run models)");
  expect(JSON.stringify(health)).not.toContain("/nonexistent/engram-models");

  // The model arrives (npm run models); reembed adds vectors to what was indexed lexical-only.
  process.env.ENGRAM_MODEL_DIR = savedModelDir ?? "";
  if (!savedModelDir) delete process.env.ENGRAM_MODEL_DIR;
  setEmbedder(undefined);
  const progress: number[] = [];
  const result = await reembedMemories(h.db, { onProgress: (done) => progress.push(done) });
  expect(result).toEqual({ total: 2, reembedded: 2, skipped: 0, failed: 0, embedder: "local:Xenova/all-MiniLM-L6-v2" });
  expect(progress).toEqual([1, 2]);
  for (const id of ids) {
    expect(await vectors(id)).toEqual([{ n: 1, with_vector: 1 }]);
    expect((await ann.get(`/v1/memories/${id}`)).body.data.processing_status).toBe("done");
  }
});

it("a memory the model cannot embed is reported and passed over: reembed still re-embeds every other memory", async () => {
  const unit = (axis: number) => Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === axis ? 1 : 0));
  let axis = 0;
  let poisoned = false;
  let down = false;
  setEmbedder({
    id: "local:test-axis",
    dimensions: EMBEDDING_DIMENSIONS,
    embed: async (texts) => {
      if (down) throw new Error("the model is down");
      if (poisoned && texts.some((text) => text.includes("Poison"))) throw new Error("the model refused this text");
      return texts.map(() => unit(axis));
    },
  });
  const ids: string[] = [];
  for (const content of ["Poison ivy grows along the north fence.", "The compost is turned every second Sunday.", "Seed potatoes are chitted in February."]) {
    ids.push((await ann.post("/v1/memories", { content })).body.data.id);
  }
  await backgroundRunner()!.idle();
  // The model changes; one memory's text is one it refuses.
  axis = 1;
  poisoned = true;
  const result = await reembedMemories(h.db, { concurrency: 1 });
  // Before, the refusal ended the whole run, and every memory after it (by id) kept its old vectors.
  expect(result).toMatchObject({ total: 5, reembedded: 4, failed: 1, skipped: 0 });
  const axisOf = async (id: string) =>
    (await h.database.sql.query<{ axis: number }>(`SELECT (embedding::real[])[2]::int AS axis FROM chunks WHERE memory_id = $1`, [id]))[0]!.axis;
  expect(await axisOf(ids[0]!)).toBe(0);
  expect(await axisOf(ids[1]!)).toBe(1);
  expect(await axisOf(ids[2]!)).toBe(1);

  // A model that fails on everything is down, not picky: the run stops after 20 failures in a row
  // instead of failing each of the hub's memories in turn.
  for (let i = 0; i < 16; i++) await ann.post("/v1/memories", { content: `Bed ${i} is left fallow this year.` });
  await backgroundRunner()!.idle();
  down = true;
  const progress: number[] = [];
  await expect(reembedMemories(h.db, { concurrency: 1, onProgress: (done) => progress.push(done) })).rejects.toThrow("the model is down");
  expect(progress).toHaveLength(20);
});

it("a run stopped by 20 failures in a row still reports what it did: the error carries the counts (reembedded, failed) for the summary", async () => {
  // More memories than the 3 the model answers plus the 20 failures that stop the run.
  const flat = (texts: string[]) => texts.map(() => Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === 2 ? 1 : 0)));
  setEmbedder({ id: "local:test-flat", dimensions: EMBEDDING_DIMENSIONS, embed: async (texts) => flat(texts) });
  for (let i = 0; i < 6; i++) await ann.post("/v1/memories", { content: `Row ${i} of the orchard is pruned in March.` });
  await backgroundRunner()!.idle();
  // A model that answers a few memories and then goes down for good.
  let calls = 0;
  setEmbedder({
    id: "local:test-dying",
    dimensions: EMBEDDING_DIMENSIONS,
    embed: async (texts) => {
      if (++calls > 3) throw new Error("the model went away");
      return flat(texts);
    },
  });
  const error = (await reembedMemories(h.db, { concurrency: 1 }).then(
    () => undefined,
    (thrown: unknown) => thrown,
  )) as (Error & { result?: { total: number; reembedded: number; failed: number; skipped: number; embedder: string } }) | undefined;
  expect(error).toBeInstanceOf(Error);
  expect(error!.message).toContain("the model went away");
  expect(error!.result).toMatchObject({ failed: 20, skipped: 0, embedder: "local:test-dying" });
  expect(error!.result!.reembedded).toBeGreaterThan(0);
  expect(error!.result!.total).toBe(error!.result!.reembedded + error!.result!.failed);
});

it("memories of a hub marked deleted (its purge not finished) are not re-embedded", async () => {
  const flat = (texts: string[]) => texts.map(() => Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === 3 ? 1 : 0)));
  setEmbedder({ id: "local:test-flat", dimensions: EMBEDDING_DIMENSIONS, embed: async (texts) => flat(texts) });
  const doomed = await h.teamHub(ann);
  const kept = await h.teamHub(ann);
  const gone = (await ann.post("/v1/memories", { content: "The doomed hub's greenhouse key is under the mat." }, { headers: { "x-hub-id": doomed } })).body.data.id as string;
  const stays = (await ann.post("/v1/memories", { content: "The kept hub's shed key hangs by the door." }, { headers: { "x-hub-id": kept } })).body.data.id as string;
  await backgroundRunner()!.idle();
  // Marked deleted as DELETE /v1/hubs/:id marks it; its memories wait for the purge (a large hub, or a process stopped mid-way).
  await h.db.hub.update({ where: { id: doomed }, data: { deletedAt: new Date() } });
  const embedded: string[] = [];
  setEmbedder({ id: "local:test-watch", dimensions: EMBEDDING_DIMENSIONS, embed: async (texts) => (embedded.push(...texts), flat(texts)) });
  const result = await reembedMemories(h.db);
  expect(result.failed).toBe(0);
  expect(embedded.some((text) => text.includes("shed key"))).toBe(true);
  expect(embedded.filter((text) => text.includes("greenhouse key"))).toEqual([]);
  expect(await h.db.memory.count({ where: { id: { in: [gone, stays] } } })).toBe(2);
});

it("progress never passes 100% when memories finish processing during the run: the total is recounted", async () => {
  setEmbedder({ id: "local:test-flat", dimensions: EMBEDDING_DIMENSIONS, embed: async (texts) => texts.map(() => Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === 0 ? 1 : 0))) });
  stopBackgroundProcessing(); // the memories left pending below stay pending until the run moves them
  const seed = (await ann.post("/v1/memories", { content: "The greenhouse vents open above 24 degrees." })).body.data.id;
  await h.db.memory.update({ where: { id: seed }, data: { processingStatus: "done" } });
  // More than a page (200) sorting before the late ones, so those are read after they finished.
  const clone = (id: string, status: string) =>
    `SELECT (json_populate_record(NULL::memories, (row_to_json(m)::jsonb || jsonb_build_object('id', ${id}, 'processing_status', '${status}'))::json)).* FROM memories m WHERE m.id = $1`;
  await h.database.sql.query(`INSERT INTO memories ${clone(`'00000000-0000-4000-8000-' || lpad(n::text, 12, '0')`, "done").replace("WHERE", ", generate_series(1, 210) n WHERE")}`, [seed]);
  await h.database.sql.query(`INSERT INTO memories ${clone(`'ffffffff-ffff-4fff-bfff-' || lpad(n::text, 12, '0')`, "pending").replace("WHERE", ", generate_series(1, 3) n WHERE")}`, [seed]);
  const progress: [number, number][] = [];
  let finished = false;
  const result = await reembedMemories(h.db, {
    onProgress: (done, total) => {
      progress.push([done, total]);
      if (!finished) {
        finished = true;
        void h.database.sql.exec(`UPDATE memories SET processing_status = 'done' WHERE id::text LIKE 'ffffffff%'`);
      }
    },
  });
  const last = progress.at(-1)!;
  expect(progress.filter(([done, total]) => done > total)).toEqual([]);
  expect(last[0]).toBe(last[1]);
  expect(result.total).toBe(result.reembedded + result.skipped + result.failed);
  expect(result.total).toBe(last[1]);
});

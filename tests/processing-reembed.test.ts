import { afterAll, beforeAll, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { setEmbedder } from "@/lib/ai/embedder.ts";
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
  expect(result).toEqual({ total: 2, reembedded: 2, skipped: 0, embedder: "local:Xenova/all-MiniLM-L6-v2" });
  expect(progress).toEqual([1, 2]);
  for (const id of ids) {
    expect(await vectors(id)).toEqual([{ n: 1, with_vector: 1 }]);
    expect((await ann.get(`/v1/memories/${id}`)).body.data.processing_status).toBe("done");
  }
});

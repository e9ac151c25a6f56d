import { afterAll, beforeAll, expect, it } from "vitest";
import { EMBEDDING_DIMENSIONS, setEmbedder } from "@/lib/ai/embedder.ts";
import { backgroundRunner, startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A chunk whose text the memory's stored chunks already hold keeps its vector (an edit to one section
// embeds that section only). Nothing said which model a stored vector came from, so after a model
// change an edited memory mixed the old model's vectors with the new one's, which recall then compared
// with the new model's query vectors as if they were alike.

let h: Harness;
let ann: Client;
let model = "local:test-a";
let asked: string[][] = [];

beforeAll(async () => {
  setEmbedder({
    get id() {
      return model;
    },
    dimensions: EMBEDDING_DIMENSIONS,
    embed: async (texts) => {
      asked.push(texts);
      return texts.map(() => Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === (model === "local:test-a" ? 0 : 1) ? 1 : 0)));
    },
  });
  h = await createHarness();
  ann = await h.user("Ann");
  await startBackgroundProcessing();
});
afterAll(async () => {
  stopBackgroundProcessing();
  setEmbedder(undefined);
  await h.close();
});

const chunks = (id: string) =>
  h.database.sql.query<{ model: string | null; axis: number }>(
    `SELECT embedding_model AS model, (embedding::real[])[2]::int AS axis FROM chunks WHERE memory_id = $1 ORDER BY position`,
    [id],
  );

it("records the model of every stored vector, reused or fresh, and reuses only the configured model's", async () => {
  const long = (extra: string) => `# Runbook\n\n## Deploy\n\n${"Deploy with the pipeline. ".repeat(60)}\n\n## Rollback\n\n${"Roll back with the previous tag. ".repeat(60)}${extra}`;
  const id = (await ann.post("/v1/memories", { content: long("") })).body.data.id as string;
  await backgroundRunner()!.idle();
  const first = await chunks(id);
  expect(first.length).toBeGreaterThan(1);
  expect(first.every((c) => c.model === "local:test-a" && c.axis === 0)).toBe(true);

  // An edit to the last section: the others keep their vectors, and say which model made them.
  asked = [];
  expect((await ann.patch(`/v1/memories/${id}`, { content: long("\n\nThen tell the channel.") })).status).toBe(200);
  await backgroundRunner()!.idle();
  expect(asked.flat().length).toBeLessThan(first.length);
  expect((await chunks(id)).every((c) => c.model === "local:test-a")).toBe(true);

  // The model changes: the next edit embeds every chunk with it, none keeps the old model's vector.
  model = "local:test-b";
  asked = [];
  expect((await ann.patch(`/v1/memories/${id}`, { content: long("\n\nThen tell the channel twice.") })).status).toBe(200);
  await backgroundRunner()!.idle();
  const after = await chunks(id);
  expect(asked.flat().length).toBe(after.length);
  expect(after.every((c) => c.model === "local:test-b" && c.axis === 1)).toBe(true);
});

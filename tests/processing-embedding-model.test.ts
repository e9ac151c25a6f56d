import { afterAll, beforeAll, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
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

it("chunks stored before the model was recorded are all embedded again by the next edit (a new title embeds none), until the documented UPDATE names their model", async () => {
  model = "local:test-a";
  const long = (extra: string) => `# Pager\n\n## Hand-over\n\n${"The pager hands over at noon. ".repeat(60)}\n\n## Escalation\n\n${"The pager goes to the secondary after 15 minutes. ".repeat(60)}${extra}`;
  const id = (await ann.post("/v1/memories", { content: long("") })).body.data.id as string;
  await backgroundRunner()!.idle();
  const count = (await chunks(id)).length;
  expect(count).toBeGreaterThan(1);
  // As migration 20261130190010 left every chunk stored before it.
  const forget = () => h.database.sql.exec(`UPDATE chunks SET embedding_model = NULL WHERE memory_id = '${id}'`);
  await forget();
  // A new title rewrites the lexical entries only (retitleChunks): no vector is made.
  asked = [];
  expect((await ann.patch(`/v1/memories/${id}`, { title: "Pager hand-over" })).status).toBe(200);
  await backgroundRunner()!.idle();
  expect(asked.flat()).toEqual([]);
  // An edit to one section embeds every chunk: none of the stored vectors says which model made it.
  expect((await ann.patch(`/v1/memories/${id}`, { content: long("\n\nPage twice.") })).status).toBe(200);
  await backgroundRunner()!.idle();
  expect(asked.flat()).toHaveLength((await chunks(id)).length);

  // An operator who knows the model never changed fills the column with the statement docs/processing.md gives.
  await forget();
  const documented = /```sql\n\s*(UPDATE chunks SET embedding_model = [^\n]*;)\n\s*```/.exec(readFileSync(path.join(process.cwd(), "docs", "processing.md"), "utf8"))?.[1];
  expect(documented).toContain("'local:Xenova/all-MiniLM-L6-v2'");
  await h.database.sql.exec(documented!.replace("'local:Xenova/all-MiniLM-L6-v2'", `'${model}'`));
  asked = [];
  expect((await ann.patch(`/v1/memories/${id}`, { content: long("\n\nPage three times.") })).status).toBe(200);
  await backgroundRunner()!.idle();
  expect(asked.flat().length).toBeGreaterThan(0);
  expect(asked.flat().length).toBeLessThan((await chunks(id)).length);
  expect((await chunks(id)).every((c) => c.model === "local:test-a")).toBe(true);
});

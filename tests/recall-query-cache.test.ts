import { afterAll, beforeAll, expect, it } from "vitest";
import { getEmbedder, setEmbedder, type Embedder } from "@/lib/ai/embedder.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// A cached query vector answers faster than the model: shared across accounts, the cache would
// tell anyone, by timing, that someone else had just recalled the very same question.

let h: Harness;
let ann: Client;
let eve: Client;
let model: Embedder | null;
const queries: string[] = [];
/** Every text embedded as a query, batches too (ask's answer sentences). */
const embeddedTexts: string[] = [];

beforeAll(async () => {
  model = await getEmbedder();
  expect(model, "the local embedding model must be installed (npm run models)").not.toBeNull();
  const real = model!;
  // The real model, watched: which query texts reached it (a cache hit does not).
  setEmbedder({
    id: real.id,
    dimensions: real.dimensions,
    embed: (texts, kind) => {
      if (kind === "query" && texts.length === 1) queries.push(texts[0]!);
      if (kind === "query") embeddedTexts.push(...texts);
      return real.embed(texts, kind);
    },
  });
  h = await createHarness();
  ann = await h.user("Ann");
  eve = await h.user("Eve");
});

afterAll(async () => {
  setEmbedder(model);
  await h.close();
});

it("a query vector cached for one user is not a cache hit for another", async () => {
  const query = "harbour warehouse acquisition budget";
  const embedded = () => queries.filter((q) => q.includes("harbour warehouse")).length;
  expect((await ann.post("/v1/recall", { query })).status).toBe(200);
  expect(embedded()).toBe(1);
  // Ann's repeat is her own hit.
  expect((await ann.post("/v1/recall", { query })).status).toBe(200);
  expect(embedded()).toBe(1);
  // Eve's identical query is embedded afresh, as fast or slow as any query of hers never asked before.
  expect((await eve.post("/v1/recall", { query })).status).toBe(200);
  expect(embedded()).toBe(2);
});

it("an answer sentence's vector cached for one user is not a cache hit for another", async () => {
  // Ask reports its synthesis time: a shared cache would tell Eve, who put a guessed sentence in her
  // own memory, whether it had just answered someone else's question.
  const sentence = "The harbour warehouse lease was signed for nine years at a fixed rent.";
  const embedded = () => embeddedTexts.filter((text) => text === sentence).length;
  for (const client of [ann, eve]) {
    const pushed = await client.post("/v1/memories", { content: `# Harbour warehouse lease\n\n${sentence}` });
    expect(pushed.status).toBe(201);
    await indexMemories(h.db, [pushed.body.data.id]);
  }
  const question = { query: "how long is the harbour warehouse lease?" };
  const first = await ann.post("/v1/ask", question);
  expect(first.status).toBe(200);
  expect(first.body.data.answer).toContain(sentence);
  expect(embedded()).toBe(1);
  // Ann's repeat is her own hit.
  expect((await ann.post("/v1/ask", question)).status).toBe(200);
  expect(embedded()).toBe(1);
  // Eve's own copy of the sentence is embedded afresh.
  const eves = await eve.post("/v1/ask", question);
  expect(eves.status).toBe(200);
  expect(eves.body.data.answer).toContain(sentence);
  expect(embedded()).toBe(2);
});

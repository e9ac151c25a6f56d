import { afterAll, beforeAll, expect, it } from "vitest";
import { getEmbedder, setEmbedder, type Embedder } from "@/lib/ai/embedder.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A cached query vector answers faster than the model: shared across accounts, the cache would
// tell anyone, by timing, that someone else had just recalled the very same question.

let h: Harness;
let ann: Client;
let eve: Client;
let model: Embedder | null;
const queries: string[] = [];

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

import { afterAll, beforeAll, expect, test } from "vitest";
import { MAX_CHUNKS } from "@/lib/processing/chunk-content.ts";
import { chunkGlosses, chunkTextsToGloss, replaceChunks, retitleChunks, type ChunkInput } from "@/lib/recall/store-chunks.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The chunk writer sends each embedding as its own parameter in pgvector's binary format
// (lib/recall/vector-parameter.ts). On both databases: the most chunks a memory can have, with and
// without embeddings, are stored whole, every vector exactly as the float4s it was given.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

test("a memory's largest chunk set is written in one statement, vectors exact and missing ones NULL", async () => {
  const created = await ann.post("/v1/memories", { content: "Chunks are written by the pipeline; this test writes them itself.", hub_id: ann.personalHubId });
  expect(created.status).toBe(201);
  const memory = { id: created.body.data.id as string, hubId: ann.personalHubId };
  const vectorOf = (i: number) => Array.from({ length: 384 }, (_, d) => Math.sin(i * 384 + d) / 10);
  const chunks: ChunkInput[] = Array.from({ length: MAX_CHUNKS }, (_, i) => ({
    position: i,
    content: `section ${i} of the runbook`,
    headingChain: "",
    tokenCount: 5,
    embedding: i % 7 === 3 ? null : vectorOf(i),
    gloss: "",
  }));
  await h.db.$transaction((tx) => replaceChunks(tx, memory, chunks));

  const rows = await h.database.sql.query<{ position: number; embedding: string | null }>(
    `SELECT position, embedding::text AS embedding FROM chunks WHERE memory_id = $1::uuid ORDER BY position`,
    [memory.id],
  );
  expect(rows).toHaveLength(MAX_CHUNKS);
  for (const row of rows) {
    const given = chunks[row.position]!.embedding;
    if (given === null) expect(row.embedding).toBeNull();
    else expect((JSON.parse(row.embedding!) as number[]).map(Math.fround)).toEqual(given.map(Math.fround));
  }
  // A rewrite replaces them (fewer chunks: another statement text).
  await h.db.$transaction((tx) => replaceChunks(tx, memory, chunks.slice(0, 2)));
  expect(await h.database.sql.query(`SELECT count(*)::int AS n FROM chunks WHERE memory_id = $1::uuid`, [memory.id])).toEqual([{ n: 2 }]);
});

// A re-title re-reads, under the memory's row lock, the chunk texts it has no glosses for (a job may
// have written them since the glosses were worked out). Those it has are not sent back: a memory of
// megabytes of Chinese text was read whole again for every rename.
test("a re-title reads back only the chunk texts its glosses do not cover", async () => {
  const created = await ann.post("/v1/memories", { content: "每周检查一次安全阀。", hub_id: ann.personalHubId });
  expect(created.status).toBe(201);
  const memory = { id: created.body.data.id as string, hubId: ann.personalHubId };
  const chunk = (position: number, headingChain: string, content: string): ChunkInput => ({ position, content, headingChain, tokenCount: 5, embedding: null, gloss: "" });
  await h.db.$transaction((tx) =>
    replaceChunks(tx, memory, [chunk(0, "", "每周检查一次安全阀。"), chunk(1, "安全", "关闭总阀门。"), chunk(2, "Safety", "plain ASCII text")]),
  );
  const glosses = await chunkGlosses(h.db, memory.id);
  expect([...glosses.keys()].sort()).toEqual(["每周检查一次安全阀。", "安全\n关闭总阀门。"].sort());
  expect(await chunkTextsToGloss(h.db, memory.id, glosses)).toEqual([]);
  expect(await chunkTextsToGloss(h.db, memory.id, new Map([["每周检查一次安全阀。", glosses.get("每周检查一次安全阀。")!]]))).toEqual(["安全\n关闭总阀门。"]);
  expect((await chunkTextsToGloss(h.db, memory.id)).sort()).toEqual([...glosses.keys()].sort());
  // The glosses given are still the ones indexed.
  await h.db.$transaction((tx) => retitleChunks(tx, memory.id, new Map([...glosses].map(([text]) => [text, "zeppelin"]))));
  const vectors = await h.database.sql.query<{ vec: string }>(`SELECT search_vector::text AS vec FROM chunks WHERE memory_id = $1::uuid AND position < 2`, [memory.id]);
  expect(vectors.map((row) => row.vec.includes("'zeppelin'"))).toEqual([true, true]);
});

import { afterAll, beforeAll, expect, test } from "vitest";
import { MAX_CHUNKS } from "@/lib/processing/chunk-content.ts";
import { replaceChunks, type ChunkInput } from "@/lib/recall/store-chunks.ts";
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

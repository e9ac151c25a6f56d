import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startEmbeddedMaintenance } from "@/lib/db/embedded-maintenance.ts";
import { newId } from "@/lib/ids.ts";
import { replaceChunks } from "@/lib/recall/store-chunks.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Issue 10: the embedded database has no autovacuum; after a bulk import the planner must get
// statistics without waiting for the 10-minute maintenance pass (the autoanalyze threshold).

let h: Harness;
let ann: Client;
const MEMORIES = 2000;
const FILLER = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ") + " " + "The on-call engineer checks the dashboards, reads the runbook and writes down what changed before paging anyone else.";
const WORDS = ["deploy", "rollback", "kafka", "consumer", "latency", "postgres", "pool", "cache", "invoice", "ledger", "retry", "webhook", "pager", "alert", "schema", "migration"];

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

const lastAnalyzed = async (table: string) =>
  (await h.database.sql.query<{ analyzed: Date | null }>(`SELECT coalesce(last_analyze, last_autoanalyze) AS analyzed FROM pg_stat_user_tables WHERE relname = $1`, [table]))[0]!
    .analyzed;

/** The lexical leg's selection, as engram_lexical_search runs it, planned with the current statistics. */
const lexicalPlan = async () =>
  (
    await h.database.sql.query<{ "QUERY PLAN": string }>(
      `EXPLAIN SELECT c.id FROM chunks c WHERE c.search_vector @@ to_tsquery('simple', 'zebra17') AND c.hub_id = ANY($1::uuid[])`,
      [[ann.personalHubId]],
    )
  )
    .map((row) => row["QUERY PLAN"])
    .join("\n");

/** The vector leg's nearest-chunk scan, planned under engram_recall_candidates' own settings. */
const vectorPlan = async (vector: number[]) =>
  h.db.$transaction(async (tx) => {
    const settings = await tx.$queryRawUnsafe<{ setting: string }[]>(
      `SELECT unnest(proconfig) AS setting FROM pg_proc WHERE proname = 'engram_recall_candidates'`,
    );
    for (const { setting } of settings) {
      const [name, value] = setting.split("=");
      await tx.$executeRawUnsafe(`SELECT set_config($1, $2, true)`, name, value);
    }
    const rows = await tx.$queryRawUnsafe<{ "QUERY PLAN": string }[]>(
      `EXPLAIN SELECT c.id, c.embedding <=> $1::vector AS distance
       FROM chunks c JOIN memories m ON m.id = c.memory_id
       WHERE c.hub_id = ANY($2::uuid[]) AND c.embedding IS NOT NULL AND m.state = 'active'
       ORDER BY c.embedding <=> $1::vector LIMIT 40`,
      `[${vector.join(",")}]`,
      [ann.personalHubId],
    );
    return rows.map((row) => row["QUERY PLAN"]).join("\n");
  });

let seed = 11;
const unitVector = () => {
  const v = Array.from({ length: 384 }, () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5);
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};

describe("planner statistics after a bulk import (embedded database)", () => {
  test("a few thousand imported memories are analysed promptly, and the lexical search uses its index", async () => {
    startEmbeddedMaintenance(h.database);
    expect(await lastAnalyzed("chunks")).toBeNull();
    const memoriesBefore = (await lastAnalyzed("memories"))?.getTime() ?? 0;

    // A bulk import: memories in batches, then indexed by the only chunk writer.
    const ids: string[] = [];
    const rows = Array.from({ length: MEMORIES }, (_, i) => {
      // Real notes' length: with its lexical entry the row outgrows a page's share and the
      // embedding is stored out of line (TOAST), which is what made a full scan look cheap.
      const content = `Note ${i}: ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} ${WORDS[(i * 3) % WORDS.length]} zebra${i}. ${FILLER}`;
      const id = newId();
      ids.push(id);
      return {
        id, hubId: ann.personalHubId, ownerId: ann.id, title: `Note ${i}`, content, contentType: "text",
        contentHash: createHash("sha256").update(content).digest("hex"), kind: "semantic", stability: "stable", state: "active",
        source: "import", processingStatus: "done",
      };
    });
    for (let i = 0; i < rows.length; i += 500) await h.db.memory.createMany({ data: rows.slice(i, i + 500) });
    for (let i = 0; i < rows.length; i += 100) {
      await h.db.$transaction(async (tx) => {
        for (const row of rows.slice(i, i + 100)) {
          await replaceChunks(tx, { id: row.id, hubId: row.hubId }, [{ position: 0, content: row.content, headingChain: "", tokenCount: 12, embedding: unitVector(), gloss: "" }]);
        }
      }, { maxWait: 60_000, timeout: 120_000 }); // 100 writes: far past Prisma's default 5 s on a busy machine
    }

    // No call to the maintenance pass: the writes themselves make the statistics check run.
    // Both tables: the vector leg's plan joins memories, and on a busy machine the chunks' analyse can
    // land a pass before the memories' (the memories' row estimate then still says 16).
    const deadline = Date.now() + 20_000;
    const memoriesAnalyzed = async () => ((await lastAnalyzed("memories"))?.getTime() ?? 0) > memoriesBefore;
    while (!((await lastAnalyzed("chunks")) && (await memoriesAnalyzed())) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await lastAnalyzed("chunks")).not.toBeNull();
    expect(await memoriesAnalyzed()).toBe(true);
    const [stats] = await h.database.sql.query<{ reltuples: number }>(`SELECT reltuples::int AS reltuples FROM pg_class WHERE relname = 'chunks'`);
    expect(stats!.reltuples).toBeGreaterThan(MEMORIES * 0.5);

    const plan = await lexicalPlan();
    // Without statistics the planner took the hub's ~2,000 chunks for 11 rows and intersected the
    // full-text match with a scan of chunks_hub_id_idx (BitmapAnd); with them it uses only the
    // full-text index.
    expect(plan, plan).toMatch(/Bitmap Index Scan on chunks_search_vector_idx/);
    expect(plan, plan).not.toMatch(/chunks_hub_id_idx|Seq Scan on chunks/);

    // The vector leg at this size uses the HNSW index. Priced as disk reads (random_page_cost 4),
    // reading and sorting all 2,000 chunks looked cheaper, and took ~12 ms instead of ~1 ms.
    const vector = await vectorPlan(unitVector());
    expect(vector, vector).toMatch(/Index Scan using chunks_embedding_hnsw_idx/);
    expect(vector, vector).not.toMatch(/Seq Scan on chunks/);

    // Memories not chunked yet are matched whole, found through an index on their status (the
    // partial full-text index or the status index), never by reading every memory: the full-text
    // index over every memory was never read, and is gone.
    const unchunked = (
      await h.database.sql.query<{ "QUERY PLAN": string }>(
        `EXPLAIN SELECT m.id FROM memories m
         WHERE m.processing_status IN ('pending', 'running') AND m.search_vector @@ to_tsquery('simple', 'zebra17') AND m.hub_id = ANY($1::uuid[])`,
        [[ann.personalHubId]],
      )
    )
      .map((row) => row["QUERY PLAN"])
      .join("\n");
    expect(unchunked, unchunked).toMatch(/memories_search_vector_unindexed_idx|memories_processing_status_updated_at_idx/);
    expect(unchunked, unchunked).not.toMatch(/Seq Scan on memories/);
  }, 180_000);
});

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

describe("planner statistics after a bulk import (embedded database)", () => {
  test("a few thousand imported memories are analysed promptly, and the lexical search uses its index", async () => {
    startEmbeddedMaintenance(h.database);
    expect(await lastAnalyzed("chunks")).toBeNull();

    // A bulk import: memories in batches, then indexed by the only chunk writer.
    const ids: string[] = [];
    const rows = Array.from({ length: MEMORIES }, (_, i) => {
      const content = `Note ${i}: ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} ${WORDS[(i * 3) % WORDS.length]} zebra${i}`;
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
          await replaceChunks(tx, { id: row.id, hubId: row.hubId }, [{ position: 0, content: row.content, headingChain: "", tokenCount: 12, embedding: null }]);
        }
      });
    }

    // No call to the maintenance pass: the writes themselves make the statistics check run.
    const deadline = Date.now() + 20_000;
    while (!(await lastAnalyzed("chunks")) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await lastAnalyzed("chunks")).not.toBeNull();
    const [stats] = await h.database.sql.query<{ reltuples: number }>(`SELECT reltuples::int AS reltuples FROM pg_class WHERE relname = 'chunks'`);
    expect(stats!.reltuples).toBeGreaterThan(MEMORIES * 0.5);

    const plan = await lexicalPlan();
    // Without statistics the planner took the hub's ~2,000 chunks for 11 rows and intersected the
    // full-text match with a scan of chunks_hub_id_idx (BitmapAnd); with them it uses only the
    // full-text index.
    expect(plan, plan).toMatch(/Bitmap Index Scan on chunks_search_vector_idx/);
    expect(plan, plan).not.toMatch(/chunks_hub_id_idx|Seq Scan on chunks/);
  }, 180_000);
});

import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { maintainEmbeddedDatabase } from "@/lib/db/embedded-maintenance.ts";
import { pruneEvents } from "@/lib/events/prune-events.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const activity = async (table: string) => {
  await h.database.sql.exec(`SELECT pg_stat_force_next_flush()`);
  return (
    await h.database.sql.query<{ dead: number; changed: number }>(
      `SELECT n_dead_tup::int AS dead, n_mod_since_analyze::int AS changed FROM pg_stat_user_tables WHERE relname = $1`,
      [table],
    )
  )[0]!;
};

describe("embedded database maintenance (the autovacuum PGlite lacks)", () => {
  test("vacuums and analyses a busy table once enough of it changed, and leaves quiet tables alone", async () => {
    const ann = await h.user("Ann");
    for (let i = 0; i < 10; i++) expect((await ann.post("/v1/memories", { content: `note ${i}` })).status).toBe(201);
    // Every access-count update leaves a dead row version behind.
    for (let i = 0; i < 100; i++) await h.database.sql.exec(`UPDATE memories SET access_count = access_count + 1`);
    const before = await activity("memories");
    expect(before.dead).toBeGreaterThan(0);
    expect(before.changed).toBeGreaterThanOrEqual(1000);

    const vacuumed = await maintainEmbeddedDatabase(h.database.sql);
    expect(vacuumed).toContain("memories");
    expect(vacuumed).not.toContain("recall_hub_stats");
    expect(await activity("memories")).toEqual({ dead: 0, changed: 0 });
    expect(await maintainEmbeddedDatabase(h.database.sql)).toEqual([]);
  });

  test("vacuums every table that churns, not only the recall tables: pruned events get their space back", async () => {
    // Two days of a busy hub's events, then the prune that runs every 10 minutes deletes them.
    await h.database.sql.exec(
      `INSERT INTO events (id, type, created_at) SELECT gen_random_uuid(), 'memory.created', now() - interval '3 days' FROM generate_series(1, 1000)`,
    );
    expect(await pruneEvents(h.database)).toBeGreaterThanOrEqual(1000);
    expect((await activity("events")).dead).toBeGreaterThanOrEqual(1000);

    expect(await maintainEmbeddedDatabase(h.database.sql)).toContain("events");
    expect((await activity("events")).dead).toBe(0);
  });

  test("full-text indexes keep no pending list: new entries go straight into the index", async () => {
    const bea = await h.user("Bea");
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await bea.post("/v1/memories", { content: `# Note ${i}\n\nwords for the index ${i}` })).body.data.id);
    await indexMemories(h.db, ids, { embed: false });
    const pending = await h.database.sql.query<{ chunks: number; unindexed: number }>(
      `SELECT gin_clean_pending_list('chunks_search_vector_idx')::int AS chunks,
              gin_clean_pending_list('memories_search_vector_unindexed_idx')::int AS unindexed`,
    );
    expect(pending[0]).toEqual({ chunks: 0, unindexed: 0 });
  });
});

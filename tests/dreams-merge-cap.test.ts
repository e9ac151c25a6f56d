import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { dueHubs } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, executeDreamRun } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The per-run bound on merges (ENGRAM_DREAM_MAX_MERGES_PER_RUN), like the one on stale archives.

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

/** Two near-duplicate pairs: with a batch of one, the similar step writes in two batches. */
async function hubWithTwoMerges(): Promise<{ hubId: string; ids: string[] }> {
  const hubId = await h.teamHub(owner);
  const ids: string[] = [];
  for (const content of [
    "Use pnpm, not npm, for installing dependencies in the web repo.",
    "In the web repo we install dependencies with pnpm instead of npm.",
    "Deploys to production happen every Tuesday after the standup, using the release script.",
    "Production deploys happen each Tuesday after standup with the release script.",
  ]) {
    const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
  }
  await indexMemories(h.db, ids);
  return { hubId, ids };
}

describe("the bound on a run's merges", () => {
  /**
   * Every merge archives a memory, and a run had no bound on them (stale archives have 500 a run): a hub
   * of near-copies lost any number of its active memories in one run. At most
   * ENGRAM_DREAM_MAX_MERGES_PER_RUN merges a run now, counted across its attempts; the rest are the next runs'.
   */
  it("merges no more than the bound, across a resume, and the next run merges the rest", async () => {
    const { hubId, ids } = await hubWithTwoMerges();
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    const config = dreamConfig({ maxMergesPerRun: 1, batchSize: 1 });
    expect(await claimDreamRun(h.db, run.run_id, "doomed", new Date(), config.staleRunMs)).toBe(true);
    const crash = new Error("simulated crash");
    const afterBatch = () => {
      throw crash;
    };
    await expect(executeDreamRun({ db: h.db, sql: h.database.sql, config, afterBatch }, run.run_id, "doomed")).rejects.toBe(crash);
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(1);
    expect(await claimDreamRun(h.db, run.run_id, "rescuer", new Date(Date.now() + 3_600_000), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, run.run_id, "rescuer")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(1);
    expect(await h.db.memory.count({ where: { id: { in: ids }, state: "archived" } })).toBe(1);
    // The pair over the bound is recorded, and the hub is due again with no new write (an archive is none).
    const done = await h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } });
    expect((done.phaseMetrics as Record<string, Record<string, number>>).similar).toMatchObject({ merges_left: 1 });
    expect(await dueHubs(h.db, new Date(Date.now() + 25 * 3_600_000), 24, 100_000)).toContain(hubId);

    const next = await queueDreamRun(h.db, hubId, owner.id, new Date());
    expect(await claimDreamRun(h.db, next.run_id, "next", new Date(), config.staleRunMs)).toBe(true);
    expect(await executeDreamRun({ db: h.db, sql: h.database.sql, config }, next.run_id, "next")).toBe("completed");
    expect(await h.db.dreamAction.count({ where: { runId: next.run_id, actionType: "merge" } })).toBe(1);
    expect(await h.db.memory.count({ where: { id: { in: ids }, state: "archived" } })).toBe(2);
  }, 120_000);

  it("is read from ENGRAM_DREAM_MAX_MERGES_PER_RUN, 500 by default", () => {
    const saved = process.env.ENGRAM_DREAM_MAX_MERGES_PER_RUN;
    try {
      delete process.env.ENGRAM_DREAM_MAX_MERGES_PER_RUN;
      expect(dreamConfig().maxMergesPerRun).toBe(500);
      process.env.ENGRAM_DREAM_MAX_MERGES_PER_RUN = "7";
      expect(dreamConfig().maxMergesPerRun).toBe(7);
    } finally {
      if (saved === undefined) delete process.env.ENGRAM_DREAM_MAX_MERGES_PER_RUN;
      else process.env.ENGRAM_DREAM_MAX_MERGES_PER_RUN = saved;
    }
  });
});

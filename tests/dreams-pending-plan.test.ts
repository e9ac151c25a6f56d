import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PENDING_DREAM_RUNS_SQL, pendingDreamRuns } from "@/lib/dreams/dream-runner.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// How the sweep of runs waiting for a worker reads dream_runs (every minute in process, daily under Inngest).

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

describe("the sweep of waiting dream runs", () => {
  /**
   * It takes the oldest waiting runs by created_at, and no index served that: the plan read every
   * queued and running run (the index on status and heartbeat) and sorted them all, or scanned the
   * whole table, finished runs and all, which only grow. A partial index on the waiting runs' created_at
   * gives them in order, and the limit stops the read.
   */
  it("reads the waiting runs in order through an index, without sorting them", async () => {
    const hubs = Array.from({ length: 400 }, (_, i) => ({ id: newId(), name: `Plan hub ${i}`, slug: `plan-hub-${i}-${newId()}`, hubType: "team", ownerId: owner.id }));
    await h.db.hub.createMany({ data: hubs });
    const now = new Date();
    // Many finished runs, a few hundred waiting (one per hub): 200 queued, 200 running (half of them stale).
    await h.database.sql.query(
      `INSERT INTO dream_runs (id, hub_id, status, heartbeat_at, created_at)
       SELECT gen_random_uuid(), (ARRAY[${hubs.map((hub) => `'${hub.id}'::uuid`).join(",")}])[1 + i % 400],
              CASE WHEN i <= 200 THEN 'queued' WHEN i <= 400 THEN 'running' ELSE 'completed' END,
              CASE WHEN i > 200 AND i <= 400 THEN $1::timestamptz - (i % 2) * interval '1 hour' END,
              $1::timestamptz - i * interval '1 minute'
       FROM generate_series(1, 40000) AS i`,
      [now.toISOString()],
    );
    await h.database.sql.exec("ANALYZE dream_runs");
    await h.database.sql.exec("ANALYZE hubs");
    const stale = new Date(now.getTime() - 120_000).toISOString();
    const plan = (await h.database.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN ${PENDING_DREAM_RUNS_SQL}`, [stale, 100]))
      .map((row) => row["QUERY PLAN"])
      .join("\n");
    expect(plan).not.toMatch(/Seq Scan on dream_runs/);
    expect(plan).not.toMatch(/Sort/);
    expect(plan).toMatch(/dream_runs_waiting_created_at_idx/);
    // What it reads: the queued runs and the stale running ones, oldest first.
    const runs = await pendingDreamRuns(h.db, now, 120_000, 1000);
    expect(runs).toHaveLength(300);
  }, 120_000);
});

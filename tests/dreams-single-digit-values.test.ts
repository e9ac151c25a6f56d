import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { indexMemories } from "./recall-helpers.ts";
import { backdateMemories } from "./support/backdate-memories.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Two memories that differ only in a value of one digit.

let h: Harness;
let owner: Client;
beforeAll(async () => {
  h = await createHarness();
  owner = await h.user("Owner");
});
afterAll(async () => {
  await h?.close();
});

describe("a pair that differs only in a one-digit value", () => {
  /**
   * The word checks dropped every one-character token, digits too: "starts at 2 am" and "starts at 4 am"
   * read as the same words, and the pair was merged as a near-duplicate, the older archived, where a
   * pair whose values differ is a contradiction for a member to decide (as "30 seconds" / "60 seconds" is).
   */
  it("is flagged as a contradiction, and neither memory is archived", async () => {
    const hubId = await h.teamHub(owner);
    const pairs = [
      ["The nightly backup job starts at 2 am.", "The nightly backup job starts at 4 am."],
      ["The login rate limit is 5 attempts per minute.", "The login rate limit is 10 attempts per minute."],
      ["The session cookie lifetime is 7 days.", "The session cookie lifetime is 14 days."],
    ];
    const ids: string[] = [];
    let i = 0;
    for (const content of pairs.flat()) {
      const res = await owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
      const at = new Date(Date.now() - 10 * 86_400_000 + i++ * 60_000);
      await backdateMemories(h.db, res.body.data.id, { createdAt: at, updatedAt: at });
    }
    await indexMemories(h.db, ids);
    const run = await queueDreamRun(h.db, hubId, owner.id, new Date());
    expect(await runDreamRunOnce(h.db, run.run_id)).toBe(true);
    const actions = await h.db.dreamAction.findMany({ where: { runId: run.run_id, actionType: { in: ["merge", "contradiction"] } }, select: { actionType: true, sourceMemoryIds: true } });
    expect(actions.map((a) => a.actionType)).toEqual(pairs.map(() => "contradiction"));
    expect(await h.db.memory.count({ where: { id: { in: ids }, state: "archived" } })).toBe(0);
  }, 120_000);
});

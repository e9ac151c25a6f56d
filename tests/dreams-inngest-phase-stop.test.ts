import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import { dreamRunFunction } from "@/inngest/dream-functions.ts";
import { DREAM_RUN_EVENT, stopDreams } from "@/lib/dreams/dream-runner.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The Inngest dream function's phase steps during a graceful stop (its own file: the stop's mark is process-wide).

let h: Harness;
let ann: Client;
beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h?.close();
});

describe("the Inngest dream function's phases once a graceful stop has begun", () => {
  /**
   * The in-process worker's run ends before its next batch on a stop, its model calls cancelled; the
   * function's phase steps got no stop at all. A step still going when the stop's grace ended had its
   * request cut (Inngest retries it, maybe elsewhere, under the same lease) and went on writing batches
   * and asking the model beside that retry until the database closed under it, to fail there. It now
   * ends before its next batch too, the run left running for the retry, not failed.
   */
  it("writes no batch, and leaves the run running for the step's retry", async () => {
    const hubId = await h.teamHub(ann);
    const ids: string[] = [];
    for (const content of ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]) {
      const res = await ann.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(h.db, ids);
    const runId = (await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    await stopDreams();
    await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(await h.db.dreamAction.count({ where: { runId } })).toBe(0);
    expect(await h.db.memory.count({ where: { id: { in: ids }, state: "active" } })).toBe(2);
    expect(await h.db.dreamRun.findUniqueOrThrow({ where: { id: runId } })).toMatchObject({ status: "running", phase: "similar", heartbeatAt: null });
  });
});

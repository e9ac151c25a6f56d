import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import { dreamRunFunction } from "@/inngest/dream-functions.ts";
import { stopCustomBoards } from "@/lib/boards/kick-custom-board.ts";
import { DREAM_RUN_EVENT } from "@/lib/dreams/dream-runner.ts";
import { newId } from "@/lib/ids.ts";
import { indexMemories } from "./recall-helpers.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// The Inngest dream function's board steps during a graceful stop (its own file: the stop's mark is process-wide).

let h: Harness;
let ann: Client;
beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await h?.close();
});

describe("the Inngest dream function once a graceful stop has begun", () => {
  /**
   * A stop makes the in-process queues take no new board (their hub's next dream run asks them), but the
   * function's board steps, run one after another in the request Inngest keeps open, asked every board
   * (a chat model call each) through the stop and into the database it closes.
   */
  it("asks no board of the hub, as the in-process worker does", async () => {
    const hubId = await h.teamHub(ann);
    const memory = await ann.post("/v1/memories", { content: "# Release checklist\nBefore a release the changelog is written." }, { headers: { "x-hub-id": hubId } });
    expect(memory.status, memory.text).toBe(201);
    await indexMemories(h.db, [memory.body.data.id]);
    const boardIds = [newId(), newId()];
    await h.db.customBoard.createMany({
      data: boardIds.map((id, i) => ({ id, hubId, createdBy: ann.id, title: `Board ${i}`, instruction: "What must happen before a release?", status: "active" })),
    });
    const runId = (await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    stopCustomBoards();
    const { result } = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(result).toEqual({ status: "completed" });
    const boards = await h.db.customBoard.findMany({ where: { id: { in: boardIds } }, select: { cardDreamRunId: true, cardAskedAt: true } });
    expect(boards).toEqual(boardIds.map(() => ({ cardDreamRunId: null, cardAskedAt: null })));
  });
});

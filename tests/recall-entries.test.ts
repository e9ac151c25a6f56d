import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadRecalled } from "@/lib/recall/load-recalled.ts";
import { createHarness, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("recall's entries statement checks access itself", () => {
  it("returns only active memories of the caller's hubs among those searched, whatever it is handed", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const push = async (client: typeof ann, content: string) => (await client.post("/v1/memories", { content })).body.data.id as string;
    const mine = await push(ann, "# Mine\n\nAnn's note.");
    const archived = await push(ann, "# Archived\n\nAnn's old note.");
    expect((await ann.patch(`/v1/memories/${archived}`, { state: "archived" })).status).toBe(200);
    const theirs = await push(bob, "# Bob's\n\nBob's private note.");
    const picks = [mine, archived, theirs].map((memoryId) => ({ memoryId, chunkId: null, score: 0.9 }));
    const load = (hubIds: string[]) => loadRecalled(h.database.sql, picks, { now: new Date(), withHub: true, userId: ann.id, hubIds });
    // Handed Bob's memory (moved, say, since the candidates were checked): it is not returned.
    expect((await load([ann.personalHubId, bob.personalHubId])).map((m) => m.id)).toEqual([mine]);
    // A hub not searched is not read either.
    expect(await load([])).toEqual([]);
  });
});

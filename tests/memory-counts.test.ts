import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Every memory count the API shows comes from the trigger-kept counters (lib/quotas/memory-counts.ts):
// after creates, edits, moves between hubs and deletes they must still equal the rows.
let h: Harness;
let ann: Client;
let bob: Client;
let team: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  team = await h.teamHub(ann, [[bob, "contributor"]]);
});
afterAll(() => h.close());

async function expectCountsMatchRows(who: Client) {
  const hubs = [who.personalHubId, team];
  const rows = new Map<string, number>();
  for (const hub of hubs) rows.set(hub, await h.db.memory.count({ where: { hubId: hub } }));
  const listed = (await who.get("/v1/hubs")).body.data;
  const me = (await who.get("/v1/auth/me")).body.data;
  for (const hub of hubs) {
    expect(listed.find((row: { hub: { id: string } }) => row.hub.id === hub).memory_count).toBe(rows.get(hub));
    expect(me.hubs.find((row: { hub: { id: string } }) => row.hub.id === hub).memory_count).toBe(rows.get(hub));
    expect((await who.get(`/v1/hubs/${hub}`)).body.data.counts.memories).toBe(rows.get(hub));
    expect((await who.get(`/v1/memories?hub_id=${hub}&limit=1`)).body.data.total).toBe(rows.get(hub));
  }
  expect((await who.get("/v1/memories?limit=1")).body.data.total).toBe(rows.get(hubs[0]!)! + rows.get(team)!);
  const owned = await h.db.memory.findMany({ where: { ownerId: who.id }, select: { content: true } });
  const usage = (await who.get("/v1/usage")).body.data;
  expect(usage.memory_count).toBe(owned.length);
  expect(usage.storage_bytes).toBe(owned.reduce((n, m) => n + Buffer.byteLength(m.content), 0));
}

describe("memory counts", () => {
  test("hub list, /auth/me, hub detail, list totals and usage follow creates, moves, edits and deletes", async () => {
    await expectCountsMatchRows(ann);
    const mine: string[] = [];
    for (let i = 0; i < 6; i++) mine.push((await ann.post("/v1/memories", { content: `ann note ${i} — café` })).body.data.id);
    for (let i = 0; i < 4; i++) await bob.post("/v1/memories", { content: `team note ${i}` }, { headers: { "x-hub-id": team } });
    await expectCountsMatchRows(ann);
    await expectCountsMatchRows(bob);

    expect((await ann.post("/v1/memories/batch-move", { ids: mine.slice(0, 2), hub_id: team })).status).toBe(200);
    expect((await ann.patch(`/v1/memories/${mine[2]}`, { content: "a longer text that replaces the note" })).status).toBe(200);
    expect((await ann.delete(`/v1/memories/${mine[3]}`)).status).toBe(200);
    expect((await ann.post("/v1/memories/batch-delete", { ids: [mine[4]] })).status).toBe(200);
    await expectCountsMatchRows(ann);
    await expectCountsMatchRows(bob);
    // The counters are real: a count that ignored deletes or moves would be off by now.
    expect((await ann.get(`/v1/hubs/${team}`)).body.data.counts.memories).toBe(6);
    expect((await ann.get("/v1/usage")).body.data.memory_count).toBe(4);
  });
});

import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Every memory count the API shows comes from the trigger-kept counters (lib/quotas/memory-counts.ts,
// lib/topics/topic-memory-counts.ts): after creates, edits, moves between hubs and topics and deletes
// they must still equal the rows.
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
  for (const hub of hubs) await expectTopicCountsMatchRows(who, hub);
}

interface TopicNode {
  id: string;
  memory_count: number;
  total_memory_count: number;
  children: TopicNode[];
}

async function expectTopicCountsMatchRows(who: Client, hub: string) {
  const rows = async (topicId: string | null) => h.db.memory.count({ where: { hubId: hub, topicId } });
  const tree = (await who.get(`/v1/topics?hub_id=${hub}`)).body.data;
  expect(tree.unassigned_count).toBe(await rows(null));
  expect((await who.get(`/v1/hubs/${hub}/summary`)).body.data.stats.inbox).toBe(await rows(null));
  const walk = async (nodes: TopicNode[]): Promise<number> => {
    let sum = 0;
    for (const node of nodes) {
      const own = await rows(node.id);
      const branch = own + (await walk(node.children));
      expect(node.memory_count).toBe(own);
      expect(node.total_memory_count).toBe(branch);
      expect((await who.get(`/v1/topics/${node.id}`)).body.data).toMatchObject({ memory_count: own, total_memory_count: branch });
      sum += branch;
    }
    return sum;
  };
  await walk(tree.topics);
  for (const archived of (await who.get(`/v1/topics/archived?hub_id=${hub}`)).body.data.topics) {
    expect(archived.memory_count).toBe(await rows(archived.id));
  }
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

  test("topic counts and the inbox follow filing, moves between topics and hubs, topic deletes and archives", async () => {
    const topic = async (name: string, hub: string, parent?: string) =>
      (await ann.post("/v1/topics", { name, hub_id: hub, ...(parent && { parent_id: parent }) })).body.data.id as string;
    const ops = await topic("Ops", team);
    const deploys = await topic("Deploys", team, ops);
    const drafts = await topic("Drafts", team);
    const personal = await topic("Reading", ann.personalHubId);
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await bob.post("/v1/memories", { content: `filed note ${i}` }, { headers: { "x-hub-id": team } })).body.data.id);
    const move = async (body: Record<string, unknown>) => expect((await ann.post("/v1/memories/batch-move", body)).status).toBe(200);
    await move({ ids: ids.slice(0, 3), topic_id: ops });
    await move({ ids: ids.slice(3, 6), topic_id: deploys });
    await move({ ids: ids.slice(6), topic_id: drafts });
    await expectCountsMatchRows(ann);
    // Between topics both ways in one statement, into another hub's topic, back to the inbox.
    await move({ ids: [ids[0], ids[3]], topic_id: drafts });
    await move({ ids: [ids[6]], topic_id: ops });
    await move({ ids: [ids[1]], topic_id: personal });
    await move({ ids: [ids[2]], hub_id: team });
    expect((await ann.patch(`/v1/memories/${ids[4]}`, { content: "an edit that changes the length of a filed note" })).status).toBe(200);
    expect((await bob.delete(`/v1/memories/${ids[5]}`)).status).toBe(200);
    await expectCountsMatchRows(ann);
    expect((await ann.get(`/v1/topics/${drafts}`)).body.data.memory_count).toBe(3);

    expect((await ann.post(`/v1/topics/${drafts}/archive`, {})).status).toBe(200);
    await expectCountsMatchRows(ann);
    // A deleted branch's memories go to the inbox, and its counters go with it.
    expect((await ann.delete(`/v1/topics/${ops}`)).status).toBe(200);
    await expectCountsMatchRows(ann);
    expect(await h.db.storageUsage.count({ where: { scope: "topic", scopeId: { in: [ops, deploys] } } })).toBe(0);
    expect((await ann.get(`/v1/hubs/${team}/summary`)).body.data.stats.inbox).toBeGreaterThanOrEqual(3);
  });
});

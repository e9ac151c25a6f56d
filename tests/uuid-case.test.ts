import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "@/lib/ids.ts";
import { clientFor, createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// UUIDs are case-insensitive: an id in upper case, wherever it enters (path, X-Hub-ID, query, body),
// names the same record as its lower-case form, one request at a time or many at once.

let h: Harness;
let ann: Client;
let team: string;
let memoryId: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  team = await h.teamHub(ann);
  const pushed = await ann.post("/v1/memories", { content: "# Kestrel rollout\n\nThe kestrel cluster rolls out on Fridays." }, { headers: { "x-hub-id": team } });
  expect(pushed.status).toBe(201);
  memoryId = pushed.body.data.id;
  await indexMemories(h.db, [memoryId], { embed: false });
});

afterAll(async () => {
  await h.close();
});

describe("upper-case ids", () => {
  it("concurrent requests naming a hub or memory in upper case all succeed", async () => {
    const upperHub = team.toUpperCase();
    const upperMemory = memoryId.toUpperCase();
    const requests = (n: number) => [
      ann.get(`/v1/hubs/${upperHub}`),
      ann.get(`/v1/memories`, { headers: { "x-hub-id": upperHub } }),
      ann.get(`/v1/memories?hub_id=${upperHub}`),
      ann.get(`/v1/memories/${upperMemory}`, { headers: { "x-hub-id": upperHub } }),
      ann.post("/v1/recall", { query: "kestrel cluster", hub_ids: [upperHub] }),
      ann.post("/v1/memories", { content: `Concurrent write ${n} in upper case` }, { headers: { "x-hub-id": upperHub } }),
    ];
    const responses = await Promise.all([...requests(1), ...requests(2)]);
    expect(responses.map((res) => res.status)).toEqual([200, 200, 200, 200, 200, 201, 200, 200, 200, 200, 200, 201]);
    expect(responses[0]!.body.data.hub.id).toBe(team);
    expect(responses[3]!.body.data.id).toBe(memoryId);
    const created = await h.db.memory.findUnique({ where: { id: responses[5]!.body.data.id } });
    expect(created?.hubId).toBe(team);
  });

  it("a hub-limited key's recall searches a hub named in upper case", async () => {
    const key = await ann.post("/v1/auth/api-keys", { name: "team only", hub_ids: [team] });
    expect(key.status).toBe(201);
    const limited = clientFor(key.body.data.key);
    const res = await limited.post("/v1/recall", { query: "kestrel cluster", hub_ids: [team.toUpperCase()] });
    expect(res.status).toBe(200);
    expect(res.body.data.query_metadata.filters.hub_ids).toEqual([team]);
    expect(res.body.data.memories.map((m: { id: string }) => m.id)).toContain(memoryId);
  });

  it("a query's hub_id names the same list in either case: a cursor from one case pages on in the other", async () => {
    const hub = await h.teamHub(ann);
    await h.db.dreamRun.createMany({ data: [1, 2, 3].map((n) => ({ id: newId(), hubId: hub, status: "completed", createdAt: new Date(Date.now() - n * 60_000) })) });
    const first = await ann.get(`/v1/dreams?hub_id=${hub.toUpperCase()}&limit=1`);
    expect(first.status, first.text).toBe(200);
    const cursor = first.body.data.next_cursor as string;
    expect(cursor).toEqual(expect.any(String));
    const next = await ann.get(`/v1/dreams?hub_id=${hub}&limit=1&cursor=${encodeURIComponent(cursor)}`);
    expect(next.status, next.text).toBe(200);
    expect(next.body.data.runs).toHaveLength(1);
  });
});

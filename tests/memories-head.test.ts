import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, createHarness, type Client, type Harness } from "./support/harness.ts";

// HEAD is Next's GET without the body; asking whether a memory is there is not reading it, so it
// must not count as an access (access_count, last_accessed feed "relevant" order and the dreams).

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

describe("HEAD /v1/memories/:id", () => {
  it("answers like GET without counting an access", async () => {
    const id = (await ann.post("/v1/memories", { content: "Heads or tails" })).body.data.id as string;
    const head = await call("HEAD", `/v1/memories/${id}`, undefined, { headers: { authorization: `Bearer ${ann.key}` } });
    expect(head.status).toBe(200);
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect([stored.accessCount, stored.lastAccessedAt]).toEqual([0, null]);
    const missing = await call("HEAD", `/v1/memories/${"0".repeat(8)}-0000-7000-8000-${"0".repeat(12)}`, undefined, { headers: { authorization: `Bearer ${ann.key}` } });
    expect(missing.status).toBe(404);
    // A GET still counts.
    expect((await ann.get(`/v1/memories/${id}`)).status).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).accessCount).toBe(1);
  });
});

describe("HEAD on the other GET routes that write", () => {
  // Next runs GET for HEAD: the notification list, its summary and the onboarding state brought the
  // caller's checklist up to date (a write, and a self-resolving checklist) for a request that reads nothing.
  it("does not refresh the onboarding checklist; a GET still does", async () => {
    const bob = await h.user("Bob");
    expect((await bob.post("/v1/onboarding/restart", {})).status).toBe(201);
    await bob.post("/v1/memories", { content: "A first memory, which ticks an item off at the next refresh." });
    const stored = async () => JSON.stringify((await h.db.notification.findFirstOrThrow({ where: { userId: bob.id, kind: "checklist" } })).payload);
    const before = await stored();
    for (const path of ["/v1/notifications", "/v1/notifications/summary", "/v1/onboarding/state"]) {
      const head = await call("HEAD", path, undefined, { headers: { authorization: `Bearer ${bob.key}` } });
      expect(head.status, path).toBe(200);
      expect(await stored(), path).toBe(before);
    }
    expect((await bob.get("/v1/onboarding/state")).status).toBe(200);
    expect(await stored()).not.toBe(before);
  });
});

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

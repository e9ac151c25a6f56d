import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSdk, memax, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// The harness itself: the built server starts on a fresh database, users come from the admin
// endpoint, and both real clients reach it.
describe("compat harness", () => {
  let engram: Engram;
  let ada: EngramUser;

  beforeAll(async () => {
    engram = await startEngram();
    ada = await engram.user("Ada");
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("serves the health check and a fresh database", async () => {
    const health = await fetch(`${engram.url}/v1/health`).then((r) => r.json());
    expect(health.data).toMatchObject({ status: "ok", database: "pglite" });
    const list = await ada.api("GET", "/v1/memories");
    expect(list.status).toBe(200);
    expect(list.body.data.memories).toEqual([]);
  });

  it("runs the real CLI against it", async () => {
    const result = await memax(engram, ["list", "--format", "json"], { key: ada.key });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ memories: [], has_more: false });
  });

  it("loads the real SDK", async () => {
    const { Memax } = await loadSdk();
    const client = new Memax({ apiUrl: engram.url, apiKey: ada.key });
    const list = await client.memories.list();
    expect(list.memories).toEqual([]);
  });
});

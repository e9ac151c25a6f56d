import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSdk, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * Memax's own SDK, unchanged, against Engram's production build: one test per
 * method of its topics resource that maps to an Engram endpoint. The tests
 * build on each other in order, in one team hub.
 */
describe("Memax SDK: topics", () => {
  let engram: Engram;
  let ada: EngramUser;
  let client: any;
  let MemaxError: new (...args: any[]) => Error;
  let hubId = "";
  const ids: Record<string, string> = {};
  let memoryId = "";

  beforeAll(async () => {
    engram = await startEngram();
    ada = await engram.user("Ada");
    const loaded = await loadSdk();
    const { Memax } = loaded;
    MemaxError = loaded.MemaxError;
    client = new Memax({ apiUrl: engram.url, apiKey: ada.key });
    hubId = (await ada.api("POST", "/v1/hubs", { name: "Topic hub" })).body.data.id;
    memoryId = (await ada.api("POST", "/v1/memories", { content: "Deploy runbook: roll back with the blue environment" }, { "x-hub-id": hubId })).body.data.id;
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("topics.create", async () => {
    const eng = await client.topics.create({ name: "Engineering", description: "Build and ship", icon: "cpu", hub_id: hubId });
    expect(eng).toMatchObject({ name: "Engineering", description: "Build and ship", icon: "cpu", hub_id: hubId, parent_id: null, pinned: false, position: 0 });
    ids.eng = eng.id;
    const deploys = await client.topics.create({ name: "Deploys", parent_id: eng.id }, hubId);
    expect(deploys).toMatchObject({ parent_id: eng.id, hub_id: hubId });
    ids.deploys = deploys.id;
    ids.ops = (await client.topics.create({ name: "Ops" }, hubId)).id;
  });

  it("topics.list", async () => {
    const tree = await client.topics.list(hubId);
    expect(tree.unassigned_count).toBe(1);
    expect(tree.topics.map((t: any) => t.name)).toEqual(["Engineering", "Ops"]);
    expect(tree.topics[0]).toMatchObject({ id: ids.eng, memory_count: 0, total_memory_count: 0, children: [expect.objectContaining({ id: ids.deploys, children: [] })] });
  });

  it("topics.get", async () => {
    expect(await client.topics.get(ids.deploys, hubId)).toMatchObject({ id: ids.deploys, name: "Deploys", parent_id: ids.eng });
  });

  it("topics.update", async () => {
    const updated = await client.topics.update(ids.deploys, { name: "Deployments", pinned: true, parent_id: null, position: 5 }, hubId);
    expect(updated).toMatchObject({ name: "Deployments", pinned: true, parent_id: null, position: 5, user_modified: true });
    const err = await client.topics.update(ids.eng, { parent_id: ids.eng }, hubId).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemaxError);
    expect((err as { code?: string }).code).toBe("cycle_detected");
  });

  it("topics.assignMemory", async () => {
    await client.topics.assignMemory(ids.deploys, memoryId, 0.9, hubId);
    expect((await ada.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id).toBe(ids.deploys);
  });

  it("topics.listMemories", async () => {
    const page = await client.topics.listMemories(ids.deploys, { limit: 10, hubId });
    expect(page).toMatchObject({ has_more: false, next_cursor: "" });
    expect(page.memories.map((m: any) => m.id)).toEqual([memoryId]);
  });

  it("topics.unassignMemory", async () => {
    await client.topics.unassignMemory(ids.deploys, memoryId, hubId);
    expect((await ada.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id).toBeNull();
  });

  it("topics.reorder", async () => {
    await client.topics.reorder(
      [
        { topic_id: ids.ops, position: 0 },
        { topic_id: ids.eng, position: 1 },
        { topic_id: ids.deploys, position: 0, parent_id: ids.ops },
      ],
      hubId,
    );
    const tree = await client.topics.list(hubId);
    expect(tree.topics.map((t: any) => t.name)).toEqual(["Ops", "Engineering"]);
    expect(tree.topics[0].children.map((t: any) => t.id)).toEqual([ids.deploys]);
  });

  it("topics.archive", async () => {
    expect(await client.topics.archive(ids.ops, hubId)).toEqual({ topic_id: ids.ops, archived_count: 2 });
    expect((await client.topics.list(hubId)).topics.map((t: any) => t.name)).toEqual(["Engineering"]);
  });

  it("topics.listArchived", async () => {
    const archived = await client.topics.listArchived(hubId);
    expect(archived.topics.map((t: any) => t.id).sort()).toEqual([ids.ops, ids.deploys].sort());
    expect(archived.topics.every((t: any) => typeof t.archived_at === "string")).toBe(true);
  });

  it("topics.restore", async () => {
    expect(await client.topics.restore(ids.ops, hubId)).toEqual({ topic_id: ids.ops, restored_count: 2 });
    expect((await client.topics.listArchived(hubId)).topics).toEqual([]);
  });

  it("topics.delete", async () => {
    await client.topics.delete(ids.ops);
    const tree = await client.topics.list(hubId);
    expect(tree.topics.map((t: any) => t.name)).toEqual(["Engineering"]);
    expect((await ada.api("GET", `/v1/topics/${ids.deploys}`)).status).toBe(404);
  });
});

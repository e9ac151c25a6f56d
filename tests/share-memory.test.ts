import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientFor, createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// POST /v1/memories/{id}/share (Memax's memories.share): a copy in another hub, the original untouched.

let h: Harness;
let ann: Client;
let mira: Client;
let vic: Client;
let eve: Client;
let team: string;
let other: string;
let note: { id: string; content: string };

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  mira = await h.user("Mira");
  vic = await h.user("Vic");
  eve = await h.user("Eve");
  team = await h.teamHub(ann, [[mira, "contributor"], [vic, "viewer"]]);
  other = await h.teamHub(mira, [[vic, "viewer"]]);
  const pushed = await ann.post(
    "/v1/memories",
    { content: "# Pager rotation\n\nThe on-call hands over on Mondays at 10:00 UTC.", kind: "procedural", stability: "stable", tags: ["oncall", "ops"], source: "cli" },
    { headers: { "x-hub-id": team } },
  );
  expect(pushed.status).toBe(201);
  note = pushed.body.data;
  note.content = (await ann.get(`/v1/memories/${note.id}`)).body.data.content;
});
afterAll(async () => {
  await h?.close();
});

describe("POST /v1/memories/{id}/share", () => {
  it("copies a memory into another hub as the sharer's, keeps the original, and returns the same copy when shared again", async () => {
    const res = await mira.post(`/v1/memories/${note.id}/share`, { target_hub_id: other });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const copy = res.body.data;
    expect(copy.id).not.toBe(note.id);
    expect(copy).toMatchObject({ hub_id: other, owner_id: mira.id, title: "Pager rotation", kind: "procedural", stability: "stable", tags: ["oncall", "ops"], source: "cli" });
    expect((await mira.get(`/v1/memories/${copy.id}`)).body.data.content).toBe(note.content);
    expect((await ann.get(`/v1/memories/${note.id}`)).body.data).toMatchObject({ hub_id: team, owner_id: ann.id });

    const again = await mira.post(`/v1/memories/${note.id}/share`, { target_hub_id: other });
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(copy.id);
    expect(await h.db.memory.count({ where: { hubId: other } })).toBe(1);

    // The copy is a memory of that hub like any other: recalled there.
    await indexMemories(h.db, [copy.id], { embed: false });
    const recall = await mira.post("/v1/recall", { query: "when does the on-call hand over", hub_ids: [other] });
    expect(recall.body.data.memories.map((m: { id: string }) => m.id)).toContain(copy.id);
  });

  it("a viewer may share out to a hub of their own, but not into a hub where they only view", async () => {
    const out = await vic.post(`/v1/memories/${note.id}/share`, { target_hub_id: vic.personalHubId });
    expect(out.status).toBe(201);
    expect(out.body.data).toMatchObject({ hub_id: vic.personalHubId, owner_id: vic.id });
    const into = await vic.post(`/v1/memories/${note.id}/share`, { target_hub_id: other });
    expect(into).toMatchObject({ status: 403, body: { error: { code: "forbidden" } } });
  });

  it("hides memories and hubs the caller cannot reach, and refuses the memory's own hub and a slug", async () => {
    expect((await eve.post(`/v1/memories/${note.id}/share`, { target_hub_id: eve.personalHubId })).status).toBe(404);
    expect((await ann.post(`/v1/memories/${note.id}/share`, { target_hub_id: eve.personalHubId })).status).toBe(404);
    const own = await ann.post(`/v1/memories/${note.id}/share`, { target_hub_id: team });
    expect(own).toMatchObject({ status: 400, body: { error: { code: "invalid_request" } } });
    expect((await ann.post(`/v1/memories/${note.id}/share`, { target_hub_id: "platform" })).status).toBe(400);
    expect((await ann.post(`/v1/memories/${note.id}/share`, {})).status).toBe(400);
    expect((await ann.post("/v1/memories/not-an-id/share", { target_hub_id: ann.personalHubId })).status).toBe(404);
    expect(await h.db.memory.count({ where: { hubId: { in: [eve.personalHubId, ann.personalHubId] } } })).toBe(0);
  });

  it("refuses a link whose page is not read yet (no pipeline runs here), and writes nothing", async () => {
    const link = await ann.post("/v1/memories", { content: "https://docs.example.test/runbook" }, { headers: { "x-hub-id": team } });
    expect(link.body.data).toMatchObject({ content_type: "link", state: "processing" });
    const res = await ann.post(`/v1/memories/${link.body.data.id}/share`, { target_hub_id: ann.personalHubId });
    expect(res).toMatchObject({ status: 409, body: { error: { code: "conflict", details: { processing_status: "pending" } } } });
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
  });

  it("shares a memory merely labelled file (no upload, so nothing is ever read) instead of refusing it for good", async () => {
    // Create and PATCH refuse the label without an upload now; rows written before that remain.
    const labelled = await ann.post("/v1/memories", { content: "Quarterly numbers, typed in by hand." }, { headers: { "x-hub-id": team } });
    expect(labelled.status, labelled.text).toBe(201);
    await h.db.memory.update({ where: { id: labelled.body.data.id }, data: { contentType: "file" } });
    const res = await ann.post(`/v1/memories/${labelled.body.data.id}/share`, { target_hub_id: ann.personalHubId });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ hub_id: ann.personalHubId, title: labelled.body.data.title });
    await ann.delete(`/v1/memories/${res.body.data.id}`);
  });

  it("needs a key that may write", async () => {
    const readOnly = await ann.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] });
    const res = await clientFor(readOnly.body.data.key).post(`/v1/memories/${note.id}/share`, { target_hub_id: ann.personalHubId });
    expect(res.status).toBe(403);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId } })).toBe(0);
  });
});

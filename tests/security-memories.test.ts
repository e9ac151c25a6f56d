import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { addMemberByEmailInvite } from "./support/add-member.ts";

/** Memory endpoints enforce hub membership and the role table of decisions.md. */
let h: Harness;
let own: Client, adm: Client, con: Client, con2: Client, vie: Client, out: Client;
let hubId: string;

beforeAll(async () => {
  h = await createHarness();
  own = await h.user("Owner");
  adm = await h.user("Admin");
  con = await h.user("Con");
  con2 = await h.user("Con2");
  vie = await h.user("Viewer");
  out = await h.user("Out");
  hubId = (await own.post("/v1/hubs", { name: "Memories team" })).body.data.id;
  for (const [user, role] of [[adm, "admin"], [con, "contributor"], [con2, "contributor"], [vie, "viewer"]] as const) {
    expect((await addMemberByEmailInvite(own, hubId, user, role)).status).toBe(201);
  }
});
afterAll(async () => {
  await h?.close();
});

let n = 0;
async function push(user: Client, hub = hubId) {
  n += 1;
  const res = await user.post("/v1/memories", { content: `# Note ${n}\n\nBody ${n} ${user.name}` }, { headers: { "x-hub-id": hub } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function setPolicy(policy: "none" | "own" | "any") {
  expect((await own.patch(`/v1/hubs/${hubId}`, { contributor_delete_policy: policy })).status).toBe(200);
}

describe("viewer", () => {
  it("reads but cannot push, edit, delete or move", async () => {
    const id = await push(own);
    expect((await vie.get(`/v1/memories/${id}`)).status).toBe(200);
    expect((await vie.get(`/v1/memories?hub_id=${hubId}`)).body.data.memories.map((m: { id: string }) => m.id)).toContain(id);
    expect((await vie.post("/v1/memories", { content: "nope" }, { headers: { "x-hub-id": hubId } })).status).toBe(403);
    expect((await vie.patch(`/v1/memories/${id}`, { title: "x" })).status).toBe(403);
    expect((await vie.delete(`/v1/memories/${id}`)).status).toBe(403);
    expect((await vie.post("/v1/memories/batch-delete", { ids: [id] })).body.data).toEqual({ deleted: 0, skipped: [{ id, reason: "not_owned" }] });
    expect((await vie.post("/v1/memories/batch-move", { ids: [id], hub_id: hubId })).status).toBe(403);
    const mine = await push(vie, vie.personalHubId);
    expect((await vie.post("/v1/memories/batch-move", { ids: [mine], hub_id: hubId })).status).toBe(403);
    expect(await h.db.memory.count({ where: { id } })).toBe(1);
  });
});

describe("contributor", () => {
  it("pushes and edits their own memories, not others'", async () => {
    const mine = await push(con);
    const theirs = await push(con2);
    expect((await con.patch(`/v1/memories/${mine}`, { title: "Mine" })).body.data.title).toBe("Mine");
    expect((await con.patch(`/v1/memories/${theirs}`, { title: "Taken" })).status).toBe(403);
    expect((await con.post("/v1/memories/batch-move", { ids: [theirs], hub_id: hubId })).body.data.skipped).toEqual([{ id: theirs, reason: "not_owned" }]);
  });

  it("deletes by contributor_delete_policy: none = nothing, own = their own, any = anyone's", async () => {
    await setPolicy("none");
    const a = await push(con);
    expect((await con.delete(`/v1/memories/${a}`)).status).toBe(403);

    await setPolicy("own");
    expect((await con.delete(`/v1/memories/${a}`)).body.data).toEqual({ id: a, deleted: true });
    const other = await push(con2);
    expect((await con.delete(`/v1/memories/${other}`)).status).toBe(403);
    expect((await con.post("/v1/memories/batch-delete", { ids: [other] })).body.data.skipped).toEqual([{ id: other, reason: "not_owned" }]);

    await setPolicy("any");
    expect((await con.delete(`/v1/memories/${other}`)).status).toBe(200);
    const ownerMemory = await push(own);
    expect((await con.post("/v1/memories/batch-delete", { ids: [ownerMemory] })).body.data).toEqual({ deleted: 1, skipped: [] });
    await setPolicy("own");
  });
});

describe("admin and owner", () => {
  it("edit, move and delete anyone's memory", async () => {
    const c = await push(con);
    expect((await adm.patch(`/v1/memories/${c}`, { tags: ["reviewed"] })).body.data.tags).toEqual(["reviewed"]);
    // Into a topic: a move to where the memory already is would be skipped as already_at_target.
    const shelf = (await adm.post("/v1/topics", { name: "Admin's shelf", hub_id: hubId })).body.data.id;
    expect((await adm.post("/v1/memories/batch-move", { ids: [c], topic_id: shelf })).body.data.moved).toBe(1);
    expect((await adm.delete(`/v1/memories/${c}`)).status).toBe(200);
    const a = await push(adm);
    expect((await own.delete(`/v1/memories/${a}`)).status).toBe(200);
  });
});

describe("scope", () => {
  it("lists every readable hub unless hub_id narrows; other hubs are not found", async () => {
    const team = await push(con);
    const personal = await push(con, con.personalHubId);
    const foreign = await push(out, out.personalHubId);
    const all = await con.get("/v1/memories?limit=100");
    const ids = all.body.data.memories.map((m: { id: string }) => m.id);
    expect(ids).toEqual(expect.arrayContaining([team, personal]));
    expect(ids).not.toContain(foreign);
    expect(all.text).not.toContain(out.personalHubId);
    const narrowed = (await con.get(`/v1/memories?hub_id=${con.personalHubId}`)).body.data.memories.map((m: { id: string }) => m.id);
    expect(narrowed).toContain(personal);
    expect(narrowed).not.toContain(team);
    expect((await con.get(`/v1/memories?hub_id=${out.personalHubId}`)).status).toBe(404);
    for (const res of [
      await con.get(`/v1/memories/${foreign}`),
      await con.patch(`/v1/memories/${foreign}`, { title: "x" }),
      await con.delete(`/v1/memories/${foreign}`),
      await con.post("/v1/memories", { content: "into a foreign hub" }, { headers: { "x-hub-id": out.personalHubId } }),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
    }
    expect((await con.post("/v1/memories/batch-delete", { ids: [foreign] })).body.data.skipped).toEqual([{ id: foreign, reason: "not_found" }]);
    expect(await h.db.memory.count({ where: { id: foreign } })).toBe(1);
  });
});

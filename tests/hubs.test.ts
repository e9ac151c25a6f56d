import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function teamHub(owner: Client, body: Record<string, unknown> = {}) {
  const res = await owner.post("/v1/hubs", { name: `Team ${Math.random().toString(36).slice(2, 8)}`, ...body });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; slug: string; name: string };
}

async function addMember(owner: Client, hubId: string, member: Client, role: string) {
  const res = await owner.post(`/v1/hubs/${hubId}/members`, { user_id: member.id, role });
  expect(res.status).toBe(201);
  return res.body.data;
}

describe("create, list, detail, summary", () => {
  it("creates a team hub with a derived slug and lists it with role and counts", async () => {
    const ann = await h.user("Ann");
    const res = await ann.post("/v1/hubs", { name: "  Platform Team — Ünïcode! " });
    expect(res.status).toBe(201);
    const hub = res.body.data;
    expect(hub).toMatchObject({
      name: "Platform Team — Ünïcode!",
      slug: "platform-team-unicode",
      hub_type: "team",
      owner_id: ann.id,
      allow_contributor_topics: false,
      allow_contributor_dreams: false,
      contributor_delete_policy: "own",
    });
    expect(hub.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    await ann.post("/v1/memories", { content: "# One" }, { headers: { "x-hub-id": hub.id } });
    const list = await ann.get("/v1/hubs");
    expect(list.status).toBe(200);
    expect(list.body.data.has_more).toBe(false);
    expect(list.body.data.next_cursor).toBe("");
    const entries = list.body.data.hubs;
    expect(entries.map((e: { hub: { hub_type: string } }) => e.hub.hub_type).sort()).toEqual(["personal", "team"]);
    const team = entries.find((e: { hub: { id: string } }) => e.hub.id === hub.id);
    expect(team).toEqual({ hub, role: "owner", memory_count: 1, member_count: 1 });
  });

  it("appends a random suffix to a derived slug that is taken, and refuses a given taken slug", async () => {
    const ann = await h.user("Ann");
    const first = await teamHub(ann, { name: "Growth" });
    const second = await teamHub(ann, { name: "Growth" });
    expect(first.slug).toBe("growth");
    expect(second.slug).toMatch(/^growth-[0-9a-f]{4}$/);
    const taken = await ann.post("/v1/hubs", { name: "Other", slug: "growth" });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("slug_taken");
  });

  it("validates name and slug, reserves the personal- prefix and pads short names", async () => {
    const ann = await h.user("Ann");
    for (const body of [{}, { name: "" }, { name: "x".repeat(101) }, { name: "A", slug: "UPPER" }, { name: "A", slug: "ab" }, { name: "A", slug: "personal-x1" }]) {
      const res = await ann.post("/v1/hubs", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect((await teamHub(ann, { name: "A" })).slug).toMatch(/^a-hub(-[0-9a-f]{4})?$/);
    expect((await teamHub(ann, { name: "日本" })).slug).toMatch(/^hub(-[0-9a-f]{4})?$/);
    expect((await teamHub(ann, { name: "Personal notes" })).slug).toMatch(/^hub-personal-notes/);
    const long = await teamHub(ann, { name: "word ".repeat(19) });
    expect(long.slug.length).toBeLessThanOrEqual(48);
    expect(long.slug).toMatch(/^[a-z0-9][a-z0-9-]{1,46}[a-z0-9]$/);
    const bad = await ann.post("/v1/hubs", "{nope", { raw: "{nope" });
    expect(bad.body.error.code).toBe("invalid_json");
  });

  it("check-slug answers available, taken or invalid", async () => {
    const ann = await h.user("Ann");
    const hub = await teamHub(ann, { slug: "checked-slug" });
    expect((await ann.get("/v1/hubs/check-slug?slug=free-slug-42")).body.data).toEqual({ slug: "free-slug-42", available: true });
    expect((await ann.get(`/v1/hubs/check-slug?slug=${hub.slug}`)).body.data).toEqual({ slug: hub.slug, available: false, reason: "taken" });
    expect((await ann.get("/v1/hubs/check-slug?slug=-bad")).body.data).toEqual({ slug: "-bad", available: false, reason: "invalid" });
    expect((await ann.get("/v1/hubs/check-slug?slug=personal-abc")).body.data.reason).toBe("invalid");
    const missing = await ann.get("/v1/hubs/check-slug");
    expect(missing.status).toBe(400);
    expect(missing.body.error.code).toBe("invalid_request");
  });

  it("detail shows members, role, counts and the pending transfer; summary is the light view", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const hub = await teamHub(ann);
    await addMember(ann, hub.id, bob, "viewer");
    await ann.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" });
    const transfer = await ann.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: bob.id });
    expect(transfer.status).toBe(201);

    const detail = await bob.get(`/v1/hubs/${hub.id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.data.role).toBe("viewer");
    expect(detail.body.data.hub.id).toBe(hub.id);
    expect(detail.body.data.members).toEqual([
      expect.objectContaining({ user_id: ann.id, role: "owner", name: "Ann", email: ann.email }),
      expect.objectContaining({ user_id: bob.id, role: "viewer", name: "Bob", email: bob.email }),
    ]);
    expect(detail.body.data.counts).toEqual({ memories: 0, members: 2, topics: 0, invites: 1 });
    expect(detail.body.data.pending_transfer).toMatchObject({ id: transfer.body.data.id, state: "pending", target_user_id: bob.id });

    const summary = await bob.get(`/v1/hubs/${hub.id}/summary`);
    expect(summary.body.data).toEqual({ hub_id: hub.id, name: hub.name, role: "viewer", counts: { memories: 0, members: 2, topics: 0, invites: 1 } });
  });

  it("paginates hubs and members with signed cursors", async () => {
    const ann = await h.user("Ann");
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push((await teamHub(ann)).id);
    const seen: string[] = [];
    let cursor = "";
    do {
      const res = await ann.get(`/v1/hubs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).toBe(200);
      expect(res.body.data.hubs.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.data.hubs.map((e: { hub: { id: string } }) => e.hub.id));
      cursor = res.body.data.next_cursor;
      expect(res.body.data.has_more).toBe(cursor !== "");
    } while (cursor);
    expect(seen).toHaveLength(5);
    expect(new Set(seen)).toEqual(new Set([ann.personalHubId, ...ids]));

    expect((await ann.get("/v1/hubs?limit=0")).body.error.code).toBe("invalid_limit");
    expect((await ann.get("/v1/hubs?cursor=forged.cursor")).body.error.code).toBe("invalid_cursor");
    const bob = await h.user("Bob");
    const first = await ann.get("/v1/hubs?limit=1");
    expect((await bob.get(`/v1/hubs?cursor=${first.body.data.next_cursor}`)).body.error.code).toBe("invalid_cursor");

    const hub = await teamHub(ann);
    const extra = [await h.user("M1"), await h.user("M2"), await h.user("M3")];
    for (const m of extra) await addMember(ann, hub.id, m, "viewer");
    const p1 = await extra[0]!.get(`/v1/hubs/${hub.id}/members?limit=3`);
    expect(p1.body.data.members).toHaveLength(3);
    expect(p1.body.data.has_more).toBe(true);
    const p2 = await extra[0]!.get(`/v1/hubs/${hub.id}/members?limit=3&cursor=${p1.body.data.next_cursor}`);
    expect(p2.body.data.members.map((m: { user_id: string }) => m.user_id)).toEqual([extra[2]!.id]);
    expect(p2.body.data).toMatchObject({ has_more: false, next_cursor: "" });
  });

  it("visit records last_visited_at for the member only", async () => {
    const ann = await h.user("Ann");
    const hub = await teamHub(ann);
    const res = await ann.post(`/v1/hubs/${hub.id}/visit`);
    expect(res.status).toBe(200);
    expect(res.body.data.hub_id).toBe(hub.id);
    const row = await h.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: ann.id } } });
    expect(row?.lastVisitedAt?.toISOString()).toBe(res.body.data.visited_at);
    const bob = await h.user("Bob");
    expect((await bob.post(`/v1/hubs/${hub.id}/visit`)).status).toBe(404);
    expect(await h.db.hubMember.count({ where: { hubId: hub.id } })).toBe(1);
  });
});

describe("update and delete", () => {
  it("owner and admin update name, slug and contributor permissions; others cannot", async () => {
    const ann = await h.user("Ann");
    const ada = await h.user("Ada");
    const cy = await h.user("Cy");
    const hub = await teamHub(ann);
    await addMember(ann, hub.id, ada, "admin");
    await addMember(ann, hub.id, cy, "contributor");
    const res = await ada.patch(`/v1/hubs/${hub.id}`, {
      name: "Renamed",
      slug: "renamed-hub",
      allow_contributor_topics: true,
      allow_contributor_dreams: true,
      contributor_delete_policy: "any",
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ name: "Renamed", slug: "renamed-hub", allow_contributor_topics: true, allow_contributor_dreams: true, contributor_delete_policy: "any" });
    expect((await cy.patch(`/v1/hubs/${hub.id}`, { name: "No" })).status).toBe(403);
    expect((await ann.patch(`/v1/hubs/${hub.id}`, {})).body.error.code).toBe("invalid_request");
    expect((await ann.patch(`/v1/hubs/${hub.id}`, { contributor_delete_policy: "all" })).body.error.code).toBe("invalid_request");
    const other = await teamHub(ann);
    const clash = await ann.patch(`/v1/hubs/${other.id}`, { slug: "renamed-hub" });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("slug_taken");
    const personal = await ann.patch(`/v1/hubs/${ann.personalHubId}`, { slug: "my-own" });
    expect(personal.body.error.code).toBe("personal_hub");
    expect((await ann.patch(`/v1/hubs/${ann.personalHubId}`, { name: "Mine" })).body.data.name).toBe("Mine");
  });

  it("delete is owner only and cascades memories, chunks, topics, invites, attachments and transfers", async () => {
    const ann = await h.user("Ann");
    const ada = await h.user("Ada");
    const hub = await teamHub(ann);
    await addMember(ann, hub.id, ada, "admin");
    const memory = await ann.post("/v1/memories", { content: "# Secret plan\n\nDetails" }, { headers: { "x-hub-id": hub.id } });
    expect(memory.status).toBe(201);
    const memoryId = memory.body.data.id;
    await h.db.chunk.create({ data: { id: crypto.randomUUID(), memoryId, hubId: hub.id, position: 0, content: "Details" } });
    await h.db.topic.create({ data: { id: crypto.randomUUID(), hubId: hub.id, name: "Plans" } });
    await h.db.attachment.create({
      data: { id: crypto.randomUUID(), memoryId, hubId: hub.id, objectKey: `k-${hub.id}`, filename: "a.txt", contentType: "text/plain", sizeBytes: 1 },
    });
    await ann.post(`/v1/hubs/${hub.id}/invites`, {});
    await ann.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id });

    const byAdmin = await ada.delete(`/v1/hubs/${hub.id}`);
    expect(byAdmin.status).toBe(403);
    expect(byAdmin.body.error.code).toBe("forbidden");
    const res = await ann.delete(`/v1/hubs/${hub.id}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: hub.id, deleted: true });
    for (const count of [
      h.db.memory.count({ where: { hubId: hub.id } }),
      h.db.chunk.count({ where: { hubId: hub.id } }),
      h.db.topic.count({ where: { hubId: hub.id } }),
      h.db.attachment.count({ where: { hubId: hub.id } }),
      h.db.invite.count({ where: { hubId: hub.id } }),
      h.db.ownershipTransfer.count({ where: { hubId: hub.id } }),
      h.db.hubMember.count({ where: { hubId: hub.id } }),
      h.db.hub.count({ where: { id: hub.id } }),
    ]) {
      expect(await count).toBe(0);
    }
    expect((await ann.get(`/v1/hubs/${hub.id}`)).status).toBe(404);
    expect((await ann.get(`/v1/memories/${memoryId}`)).status).toBe(404);
  });

  it("personal hubs cannot be deleted, left, shared or transferred", async () => {
    const ann = await h.user("Ann");
    const bob = await h.user("Bob");
    const id = ann.personalHubId;
    for (const res of [
      await ann.delete(`/v1/hubs/${id}`),
      await ann.post(`/v1/hubs/${id}/leave`),
      await ann.post(`/v1/hubs/${id}/members`, { user_id: bob.id, role: "viewer" }),
      await ann.post(`/v1/hubs/${id}/invites`, { role: "viewer" }),
      await ann.post(`/v1/hubs/${id}/ownership-transfer`, { target_user_id: bob.id }),
    ]) {
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("personal_hub");
    }
    expect(await h.db.hubMember.count({ where: { hubId: id } })).toBe(1);
  });
});

describe("members", () => {
  it("follows the role table: admins manage contributors and viewers, only the owner manages admins", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const adm2 = await h.user("Admin2");
    const con = await h.user("Contrib");
    const vie = await h.user("Viewer");
    const out = await h.user("Out");
    const hub = await teamHub(own);
    const added = await addMember(own, hub.id, adm, "admin");
    expect(added).toMatchObject({ user_id: adm.id, role: "admin", name: "Admin", email: adm.email });
    await addMember(own, hub.id, adm2, "admin");
    await addMember(adm, hub.id, con, "contributor");
    await addMember(adm, hub.id, vie, "viewer");

    const base = `/v1/hubs/${hub.id}/members`;
    const code = async (p: Promise<{ status: number; body: { error?: { code: string } } }>) => {
      const r = await p;
      return `${r.status} ${r.body.error?.code ?? ""}`.trim();
    };
    expect(await code(adm.post(base, { user_id: out.id, role: "admin" }))).toBe("403 forbidden");
    expect(await code(con.post(base, { user_id: out.id, role: "viewer" }))).toBe("403 forbidden");
    expect(await code(out.post(base, { user_id: out.id, role: "viewer" }))).toBe("404 not_found");
    expect(await code(adm.post(base, { user_id: vie.id, role: "viewer" }))).toBe("409 already_member");
    expect(await code(adm.post(base, { user_id: crypto.randomUUID(), role: "viewer" }))).toBe("404 not_found");
    expect(await code(adm.post(base, { user_id: out.id, role: "owner" }))).toBe("400 invalid_request");

    expect(await code(adm.patch(`${base}/${adm2.id}`, { role: "viewer" }))).toBe("403 forbidden");
    expect(await code(adm.patch(`${base}/${con.id}`, { role: "admin" }))).toBe("403 forbidden");
    expect(await code(adm.patch(`${base}/${own.id}`, { role: "viewer" }))).toBe("400 cannot_change_owner");
    expect(await code(own.patch(`${base}/${own.id}`, { role: "admin" }))).toBe("400 cannot_change_owner");
    expect(await code(con.patch(`${base}/${vie.id}`, { role: "contributor" }))).toBe("403 forbidden");
    expect(await code(adm.patch(`${base}/${out.id}`, { role: "viewer" }))).toBe("404 not_found");
    const changed = await adm.patch(`${base}/${vie.id}`, { role: "contributor" });
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject({ user_id: vie.id, role: "contributor" });
    expect((await own.patch(`${base}/${adm2.id}`, { role: "viewer" })).body.data.role).toBe("viewer");

    expect(await code(adm.delete(`${base}/${own.id}`))).toBe("400 cannot_change_owner");
    expect(await code(con.delete(`${base}/${vie.id}`))).toBe("403 forbidden");
    await own.patch(`${base}/${adm2.id}`, { role: "admin" });
    expect(await code(adm.delete(`${base}/${adm2.id}`))).toBe("403 forbidden");
    const removed = await adm.delete(`${base}/${vie.id}`);
    expect(removed.body.data).toEqual({ user_id: vie.id, removed: true });
    expect((await own.delete(`${base}/${adm2.id}`)).status).toBe(200);
    expect((await con.delete(`${base}/${con.id}`)).body.data).toEqual({ user_id: con.id, removed: true });
    const left = await h.db.hubMember.findMany({ where: { hubId: hub.id }, orderBy: { role: "asc" } });
    expect(left.map((m) => `${m.userId}:${m.role}`).sort()).toEqual([`${adm.id}:admin`, `${own.id}:owner`].sort());
  });

  it("leave: members leave, the owner must transfer first or delete when alone", async () => {
    const own = await h.user("Owner");
    const vie = await h.user("Viewer");
    const hub = await teamHub(own);
    await addMember(own, hub.id, vie, "viewer");
    const blocked = await own.post(`/v1/hubs/${hub.id}/leave`);
    expect(blocked.status).toBe(400);
    expect(blocked.body.error.code).toBe("ownership_transfer_required");
    const left = await vie.post(`/v1/hubs/${hub.id}/leave`);
    expect(left.body.data).toEqual({ hub_id: hub.id, left: true });
    expect((await vie.get(`/v1/hubs/${hub.id}`)).status).toBe(404);
    expect((await vie.post(`/v1/hubs/${hub.id}/leave`)).status).toBe(404);
    const alone = await own.post(`/v1/hubs/${hub.id}/leave`);
    expect(alone.body.error.code).toBe("last_member_delete_required");
  });

  it("role changes and removals apply on the very next request", async () => {
    const own = await h.user("Owner");
    const cy = await h.user("Cy");
    const hub = await teamHub(own);
    await addMember(own, hub.id, cy, "contributor");
    const headers = { "x-hub-id": hub.id };
    expect((await cy.post("/v1/memories", { content: "first" }, { headers })).status).toBe(201);
    await own.patch(`/v1/hubs/${hub.id}/members/${cy.id}`, { role: "viewer" });
    const denied = await cy.post("/v1/memories", { content: "second" }, { headers });
    expect(denied.status).toBe(403);
    expect((await cy.get(`/v1/memories?hub_id=${hub.id}`)).status).toBe(200);
    await own.patch(`/v1/hubs/${hub.id}/members/${cy.id}`, { role: "contributor" });
    expect((await cy.post("/v1/memories", { content: "third" }, { headers })).status).toBe(201);
    await own.delete(`/v1/hubs/${hub.id}/members/${cy.id}`);
    expect((await cy.post("/v1/memories", { content: "fourth" }, { headers })).status).toBe(404);
    expect((await cy.get(`/v1/memories?hub_id=${hub.id}`)).status).toBe(404);
    expect((await cy.get(`/v1/hubs/${hub.id}`)).status).toBe(404);
    const list = await cy.get("/v1/memories");
    expect(list.text).not.toContain(hub.id);
  });
});

describe("ownership transfer", () => {
  async function setup() {
    const own = await h.user("Owner");
    const ada = await h.user("Ada");
    const vie = await h.user("Viewer");
    const hub = await teamHub(own);
    await addMember(own, hub.id, ada, "admin");
    await addMember(own, hub.id, vie, "viewer");
    return { own, ada, vie, hub };
  }

  it("owner offers, target accepts: target becomes owner, previous owner admin, hubs.owner_id follows", async () => {
    const { own, ada, vie, hub } = await setup();
    expect((await ada.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: vie.id })).status).toBe(403);
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: own.id })).body.error.code).toBe("invalid_request");
    const stranger = await h.user("Stranger");
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: stranger.id })).body.error.code).toBe("invalid_request");

    const created = await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id });
    expect(created.status).toBe(201);
    const t = created.body.data;
    expect(t).toMatchObject({ hub_id: hub.id, from_user_id: own.id, target_user_id: ada.id, state: "pending", resolved_at: null });
    expect(new Date(t.expires_at).getTime() - new Date(t.created_at).getTime()).toBe(7 * 24 * 3600 * 1000);

    const again = await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: vie.id });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "transfer_exists", details: { transfer_id: t.id } });

    expect((await vie.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/accept`)).status).toBe(403);
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/accept`)).status).toBe(403);
    expect((await stranger.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/accept`)).status).toBe(404);
    const accepted = await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/accept`);
    expect(accepted.status).toBe(200);
    expect(accepted.body.data).toMatchObject({ id: t.id, state: "accepted" });
    expect(accepted.body.data.resolved_at).not.toBeNull();

    const detail = await ada.get(`/v1/hubs/${hub.id}`);
    expect(detail.body.data.role).toBe("owner");
    expect(detail.body.data.hub.owner_id).toBe(ada.id);
    expect(detail.body.data.pending_transfer).toBeNull();
    const roles = Object.fromEntries(detail.body.data.members.map((m: { user_id: string; role: string }) => [m.user_id, m.role]));
    expect(roles).toEqual({ [own.id]: "admin", [ada.id]: "owner", [vie.id]: "viewer" });
    // Powers moved with the role, on the next request.
    expect((await own.delete(`/v1/hubs/${hub.id}`)).status).toBe(403);
    expect((await own.post(`/v1/hubs/${hub.id}/leave`)).body.data).toEqual({ hub_id: hub.id, left: true });

    const twice = await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/accept`);
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe("conflict");
    expect((await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t.id}/cancel`)).body.error.code).toBe("conflict");
  });

  it("owner or target cancels while pending; canceled and expired transfers answer 410", async () => {
    const { own, ada, vie, hub } = await setup();
    const t1 = (await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id })).body.data;
    expect((await vie.post(`/v1/hubs/${hub.id}/ownership-transfer/${t1.id}/cancel`)).status).toBe(403);
    const canceled = await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t1.id}/cancel`);
    expect(canceled.status).toBe(200);
    expect(canceled.body.data.state).toBe("canceled");
    const late = await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t1.id}/accept`);
    expect(late.status).toBe(410);
    expect(late.body.error.code).toBe("canceled");

    const t2 = (await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: vie.id })).body.data;
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer/${t2.id}/cancel`)).body.data.state).toBe("canceled");

    const t3 = (await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id })).body.data;
    await h.db.ownershipTransfer.update({ where: { id: t3.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const expired = await ada.post(`/v1/hubs/${hub.id}/ownership-transfer/${t3.id}/accept`);
    expect(expired.status).toBe(410);
    expect(expired.body.error.code).toBe("expired");
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer/${t3.id}/cancel`)).body.error.code).toBe("expired");
    expect((await own.get(`/v1/hubs/${hub.id}`)).body.data.pending_transfer).toBeNull();
    // An expired offer does not block a new one.
    const t4 = await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id });
    expect(t4.status).toBe(201);
    expect((await h.db.ownershipTransfer.findUnique({ where: { id: t3.id } }))?.state).toBe("expired");
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer/${crypto.randomUUID()}/accept`)).status).toBe(404);
    expect((await own.post(`/v1/hubs/${hub.id}/ownership-transfer/not-a-uuid/cancel`)).status).toBe(404);
  });

  it("removing or losing the target cancels the pending transfer", async () => {
    const { own, ada, hub } = await setup();
    const t = (await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id })).body.data;
    await ada.post(`/v1/hubs/${hub.id}/leave`);
    expect((await h.db.ownershipTransfer.findUnique({ where: { id: t.id } }))?.state).toBe("canceled");
  });

  it("two simultaneous transfers: exactly one pending, the other transfer_exists", async () => {
    const { own, ada, vie, hub } = await setup();
    const results = await Promise.all([
      own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id }),
      own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: vie.id }),
      own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: ada.id }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    expect(results.filter((r) => r.status === 409).every((r) => r.body.error.code === "transfer_exists")).toBe(true);
    expect(await h.db.ownershipTransfer.count({ where: { hubId: hub.id, state: "pending" } })).toBe(1);
  });

  it("the partial unique index refuses a second pending transfer even past the application check", async () => {
    const { own, ada, vie, hub } = await setup();
    const base = { hubId: hub.id, fromUserId: own.id, state: "pending", expiresAt: new Date(Date.now() + 1000) };
    await h.db.ownershipTransfer.create({ data: { ...base, id: crypto.randomUUID(), targetUserId: ada.id } });
    await expect(h.db.ownershipTransfer.create({ data: { ...base, id: crypto.randomUUID(), targetUserId: vie.id } })).rejects.toThrow();
  });
});

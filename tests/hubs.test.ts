import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { addMemberByEmailInvite } from "./support/add-member.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createTransfer } from "@/lib/hubs/create-transfer.ts";

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
  const res = await addMemberByEmailInvite(owner, hubId, member, role);
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
    // A plain array (the Memax clients iterate it), bounded by the hubs-per-user cap.
    expect(Array.isArray(list.body.data)).toBe(true);
    const entries = list.body.data;
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
    // A name with line breaks would write its own lines into the invitation e-mails that quote it.
    const lineBreaks = { name: "Team\n\nYour account is locked: https://evil.example/unlock" };
    for (const body of [{}, { name: "" }, { name: "x".repeat(101) }, { name: "A", slug: "UPPER" }, { name: "A", slug: "ab" }, { name: "A", slug: "personal-x1" }, lineBreaks, { name: "Tab\tname" }]) {
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
    // However long, a slug given is a question with an answer, not a missing one ("slug is required" was a 400 past 200 characters).
    const long = "a".repeat(201);
    expect((await ann.get(`/v1/hubs/check-slug?slug=${long}`)).body.data).toEqual({ slug: long, available: false, reason: "invalid" });
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
    // A viewer sees the owner's e-mail masked, and their own in full.
    const masked = `${ann.email[0]}•••@example.test`;
    expect(detail.body.data.members).toEqual([
      { user_id: ann.id, role: "owner", name: "Ann", email: masked, user_name: "Ann", user_email: masked, user_avatar_url: "", joined_at: expect.any(String) },
      { user_id: bob.id, role: "viewer", name: "Bob", email: bob.email, user_name: "Bob", user_email: bob.email, user_avatar_url: "", joined_at: expect.any(String) },
    ]);
    expect(detail.text).not.toContain(ann.email);
    const ownerView = await ann.get(`/v1/hubs/${hub.id}`);
    expect(ownerView.body.data.members.map((m: { user_email: string }) => m.user_email)).toEqual([ann.email, bob.email]);
    expect(detail.body.data.counts).toEqual({ memories: 0, members: 2, topics: 0, invites: 1 });
    expect(detail.body.data.pending_transfer).toMatchObject({
      id: transfer.body.data.id,
      state: "pending",
      target_user_id: bob.id,
      initiated_by: ann.id,
      accepted_at: null,
      cancelled_at: null,
    });

    const summary = await bob.get(`/v1/hubs/${hub.id}/summary`, { headers: { "x-timezone": "Asia/Tokyo" } });
    expect(summary.body.data).toEqual({
      hub: detail.body.data.hub,
      role: "viewer",
      stats: { memories: 0, topics: 0, inbox: 0, pending_review: 0, members: 2, team_activity: 0 },
      members_preview: [
        { user_id: ann.id, user_name: "Ann", user_avatar_url: "" },
        { user_id: bob.id, user_name: "Bob", user_avatar_url: "" },
      ],
      header: { state: "first_time", greeting_key: expect.stringMatching(/^firstTime[AB]$/), greeting_params: { name: "Bob" }, time_bucket: expect.any(String) },
      hub_id: hub.id,
      name: hub.name,
      counts: { memories: 0, members: 2, topics: 0, invites: 1 },
    });
    // Ann pushes: Bob's header turns to team activity, counted since his last visit.
    await bob.post(`/v1/hubs/${hub.id}/visit`);
    await h.db.hubMember.update({ where: { hubId_userId: { hubId: hub.id, userId: bob.id } }, data: { lastVisitedAt: new Date(Date.now() - 60_000) } });
    await ann.post("/v1/memories", { content: "Fresh news" }, { headers: { "x-hub-id": hub.id } });
    const after = (await bob.get(`/v1/hubs/${hub.id}/summary`)).body.data;
    expect(after.stats).toMatchObject({ memories: 1, inbox: 1, team_activity: 1 });
    expect(after.header).toMatchObject({ state: "team_activity", greeting_params: { name: "Bob", count: "1" } });
  });

  it("lists every hub as one array, capped at 100 hubs per user on create, accept and add; paginates members", async () => {
    const ann = await h.user("Ann");
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await teamHub(ann)).id);
    const all = await ann.get("/v1/hubs?limit=1");
    expect(all.body.data.map((e: { hub: { id: string } }) => e.hub.id)).toEqual([ann.personalHubId, ...ids]);

    // Fill Cal up to the cap straight in the database, then every way in is refused.
    const cal = await h.user("Cal");
    for (let i = 0; i < 99; i++) await h.teamHub(cal);
    expect((await cal.get("/v1/hubs")).body.data).toHaveLength(100);
    const refused = await cal.post("/v1/hubs", { name: "One too many" });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "hub_limit_reached", details: { limit: 100 } });
    const annHub = ids[0]!;
    const invite = await ann.post(`/v1/hubs/${annHub}/invites`, { role: "viewer", email: cal.email });
    expect((await cal.post(`/v1/invites/${invite.body.data.token}/accept`)).body.error.code).toBe("hub_limit_reached");
    expect((await ann.post(`/v1/hubs/${annHub}/members`, { user_id: cal.id, role: "viewer" })).body.error.code).toBe("hub_limit_reached");
    expect(await h.db.hubMember.count({ where: { userId: cal.id } })).toBe(100);

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
    // An empty patch changes nothing and answers the hub (clients may send only fields a server ignores).
    const noop = await ann.patch(`/v1/hubs/${hub.id}`, {});
    expect(noop.status).toBe(200);
    expect(noop.body.data).toMatchObject({ id: hub.id, name: "Renamed" });
    expect((await ann.patch(`/v1/hubs/${hub.id}`, { contributor_delete_policy: "all" })).body.error.code).toBe("invalid_request");
    const other = await teamHub(ann);
    const clash = await ann.patch(`/v1/hubs/${other.id}`, { slug: "renamed-hub" });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("slug_taken");
    expect((await ann.patch(`/v1/hubs/${hub.id}`, { name: "Ops\r\nBcc: someone@example.test" })).body.error.code).toBe("invalid_request");
    const personal = await ann.patch(`/v1/hubs/${ann.personalHubId}`, { slug: "my-own" });
    expect(personal.body.error.code).toBe("personal_hub");
    expect((await ann.patch(`/v1/hubs/${ann.personalHubId}`, { name: "Mine" })).body.data.name).toBe("Mine");
    // A client sending back the personal hub it read, slug included, changes what it changed (the slug
    // is its own); a team hub still cannot take the reserved prefix, nor a personal hub another one.
    const own = (await ann.get(`/v1/hubs/${ann.personalHubId}`)).body.data.hub;
    const echoed = await ann.patch(`/v1/hubs/${ann.personalHubId}`, { name: "Mine again", slug: own.slug });
    expect(echoed.status, echoed.text).toBe(200);
    expect(echoed.body.data).toMatchObject({ name: "Mine again", slug: own.slug });
    const reserved = await ann.patch(`/v1/hubs/${other.id}`, { slug: "personal-abc123" });
    expect(reserved.status).toBe(400);
    expect(reserved.body.error).toMatchObject({ code: "invalid_request", details: { issues: [{ path: "slug" }] } });
    expect((await ann.patch(`/v1/hubs/${ann.personalHubId}`, { slug: "personal-0000ffff" })).body.error.code).toBe("personal_hub");
  });

  it("stores icon, accent, header aurora mode and settings (merged; null deletes, \"\" clears)", async () => {
    const ann = await h.user("Ann");
    const hub = await teamHub(ann);
    const res = await ann.patch(`/v1/hubs/${hub.id}`, {
      icon: "rocket",
      accent: "violet",
      header_aurora_mode: "time",
      settings: { dreams_enabled: true, dreams_merge_enabled: false },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ icon: "rocket", accent: "violet", header_aurora_mode: "time", settings: { dreams_enabled: true, dreams_merge_enabled: false } });
    const merged = await ann.patch(`/v1/hubs/${hub.id}`, { settings: { dreams_merge_enabled: null, dreams_archive_enabled: true }, accent: "", header_aurora_mode: "" });
    expect(merged.body.data.settings).toEqual({ dreams_enabled: true, dreams_archive_enabled: true });
    expect(merged.body.data).not.toHaveProperty("accent");
    expect(merged.body.data).not.toHaveProperty("header_aurora_mode");
    expect(merged.body.data.icon).toBe("rocket");
    const row = await h.db.hub.findUniqueOrThrow({ where: { id: hub.id } });
    expect(row).toMatchObject({ icon: "rocket", accent: null, headerAuroraMode: null, settings: { dreams_enabled: true, dreams_archive_enabled: true } });
    // The list and detail carry the same hub object.
    const listed = (await ann.get("/v1/hubs")).body.data.find((e: { hub: { id: string } }) => e.hub.id === hub.id);
    expect(listed.hub).toEqual(merged.body.data);
    // A settings key this server does not know is ignored (and reported), like any unknown field.
    const unknown = await ann.patch(`/v1/hubs/${hub.id}`, { settings: { unknown_key: true } });
    expect(unknown.status).toBe(200);
    expect(unknown.headers.get("x-engram-warning")).toContain("settings.unknown_key");
    expect(unknown.body.data.settings).toEqual({ dreams_enabled: true, dreams_archive_enabled: true });
    for (const body of [{ accent: "pink" }, { header_aurora_mode: "loud" }, { settings: { dreams_enabled: "yes" } }, { icon: "x".repeat(65) }]) {
      const bad = await ann.patch(`/v1/hubs/${hub.id}`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
    }
    const personal = await ann.patch(`/v1/hubs/${ann.personalHubId}`, { header_aurora_mode: "none" });
    expect(personal.body.error.code).toBe("personal_hub");
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
    expect(res.body.data).toEqual({ id: hub.id, hub_id: hub.id, deleted: true });
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
      // Removing oneself is leaving: not "transfer ownership first, or delete the hub", neither of which a personal hub allows.
      await ann.delete(`/v1/hubs/${id}/members/${ann.id}`),
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
    expect(removed.body.data).toEqual({ user_id: vie.id, removed: true, status: "removed" });
    expect((await own.delete(`${base}/${adm2.id}`)).status).toBe(200);
    expect((await con.delete(`${base}/${con.id}`)).body.data).toEqual({ user_id: con.id, removed: true, status: "removed" });
    const left = await h.db.hubMember.findMany({ where: { hubId: hub.id }, orderBy: { role: "asc" } });
    expect(left.map((m) => `${m.userId}:${m.role}`).sort()).toEqual([`${adm.id}:admin`, `${own.id}:owner`].sort());
  });

  it("adding by user id needs the adder to find the person: an e-mailed invite, or a hub they manage together", async () => {
    const ann = await h.user("Ann");
    const stranger = await h.user("Stranger");
    const known = await h.user("Known");
    const hub = await teamHub(ann);
    const base = `/v1/hubs/${hub.id}/members`;
    // A user id alone finds nobody: same answer as an id that does not exist, and no e-mail comes back.
    const blind = await ann.post(base, { user_id: stranger.id, role: "viewer" });
    expect(blind.status).toBe(404);
    expect(blind.body.error.code).toBe("not_found");
    expect(blind.text).not.toContain(stranger.email);
    expect(await h.db.hubMember.count({ where: { hubId: hub.id } })).toBe(1);
    // A link-only invite, or one addressed to another e-mail, does not count.
    await ann.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" });
    await ann.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "someone-else@example.test" });
    expect((await ann.post(base, { user_id: stranger.id, role: "viewer" })).status).toBe(404);
    // An invite e-mailed to their address does, and is used up by the add.
    const invite = await ann.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: stranger.email.toUpperCase() });
    const added = await ann.post(base, { user_id: stranger.id, role: "contributor" });
    expect(added.status).toBe(201);
    expect(added.body.data).toMatchObject({ user_id: stranger.id, role: "contributor", user_email: stranger.email });
    expect((await h.db.invite.findUniqueOrThrow({ where: { id: invite.body.data.id } })).state).toBe("accepted");
    // Sharing a hub as a mere member is not enough: there the e-mail is masked, so adding must not reveal it.
    const other = await h.teamHub(known, [[ann, "viewer"]]);
    expect((await ann.post(base, { user_id: known.id, role: "viewer" })).status).toBe(404);
    // Managing a hub together is: an admin there already sees the address.
    await h.db.hubMember.update({ where: { hubId_userId: { hubId: other, userId: ann.id } }, data: { role: "admin" } });
    expect((await ann.post(base, { user_id: known.id, role: "viewer" })).status).toBe(201);
  });

  it("member e-mails go to owners and admins; contributors and viewers see them masked, except their own", async () => {
    const ann = await h.user("Ann");
    const ada = await h.user("Ada");
    const cy = await h.user("Cy");
    const vi = await h.user("Vi");
    const hub = await h.teamHub(ann, [[ada, "admin"], [cy, "contributor"], [vi, "viewer"]]);
    const everyone = [ann, ada, cy, vi];
    for (const [viewer, seesAll] of [[ann, true], [ada, true], [cy, false], [vi, false]] as const) {
      for (const path of [`/v1/hubs/${hub}`, `/v1/hubs/${hub}/members`]) {
        const res = await viewer.get(path);
        expect(res.status).toBe(200);
        for (const member of everyone) {
          const row = res.body.data.members.find((m: { user_id: string }) => m.user_id === member.id);
          const visible = seesAll || member.id === viewer.id;
          expect(row.user_email, `${viewer.name} reading ${member.name} on ${path}`).toBe(visible ? member.email : `${member.email[0]}•••@example.test`);
          expect(row.email).toBe(row.user_email);
          if (!visible) expect(res.text).not.toContain(member.email);
        }
      }
    }
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
    expect(left.body.data).toEqual({ hub_id: hub.id, left: true, status: "left" });
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
    expect((await own.post(`/v1/hubs/${hub.id}/leave`)).body.data).toEqual({ hub_id: hub.id, left: true, status: "left" });

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

describe("an ownership offer by an owner who handed the hub over meanwhile", () => {
  /**
   * The owner was checked before the offer's transaction and not again under the hub's membership
   * lock (which an accepted transfer takes exclusively): an owner demoted to admin by a transfer
   * committed in between still offered the hub to someone, and that pending offer (with its
   * notification) blocked the new owner's own offers until cancelled.
   */
  it("is 403 and leaves no pending offer", async () => {
    const own = await h.user("Formerowner");
    const ada = await h.user("Newowner");
    const tom = await h.user("Target");
    const hub = await teamHub(own);
    await addMember(own, hub.id, ada, "admin");
    await addMember(own, hub.id, tom, "contributor");
    const handOver = () =>
      h.db.$transaction([
        h.db.hub.update({ where: { id: hub.id }, data: { ownerId: ada.id } }),
        h.db.hubMember.update({ where: { hubId_userId: { hubId: hub.id, userId: ada.id } }, data: { role: "owner" } }),
        h.db.hubMember.update({ where: { hubId_userId: { hubId: hub.id, userId: own.id } }, data: { role: "admin" } }),
      ]);
    const ctx = sessionContext(h, own, changedBefore(h.db, ["$transaction"], handOver));
    await expect(createTransfer(ctx, hub.id, { target_user_id: tom.id })).rejects.toMatchObject({ code: "forbidden" });
    expect(await h.db.ownershipTransfer.count({ where: { hubId: hub.id } })).toBe(0);
  });
});

describe("a user id written in capitals names the same user", () => {
  /**
   * Ids are UUIDs, which the database compares without regard to case, while the checks for "yourself"
   * compared strings: an owner offering the hub to their own id in capitals got 201 and a pending offer
   * to themself (unacceptable, blocking every real offer until cancelled), and a contributor removing
   * themself that way was told their role may not remove members; events named the id as typed.
   */
  it("an offer to your own id in capitals is 400 and leaves no offer; removing yourself that way is leaving", async () => {
    const own = await h.user("Owner");
    const con = await h.user("Contrib");
    const hub = await teamHub(own);
    await addMember(own, hub.id, con, "contributor");
    const offer = await own.post(`/v1/hubs/${hub.id}/ownership-transfer`, { target_user_id: own.id.toUpperCase() });
    expect(offer.status).toBe(400);
    expect(offer.body.error.code).toBe("invalid_request");
    expect(await h.db.ownershipTransfer.count({ where: { hubId: hub.id } })).toBe(0);

    const left = await con.delete(`/v1/hubs/${hub.id}/members/${con.id.toUpperCase()}`);
    expect(left.status).toBe(200);
    expect(left.body.data).toEqual({ user_id: con.id, removed: true, status: "removed" });
    expect(await h.db.hubMember.count({ where: { hubId: hub.id, userId: con.id } })).toBe(0);
    const event = await h.db.event.findFirstOrThrow({ where: { hubId: hub.id, type: "member.removed" } });
    expect(event.entityId).toBe(con.id);
  });

  it("a role change by an id in capitals answers and announces the member's id as stored", async () => {
    const own = await h.user("Owner");
    const con = await h.user("Contrib");
    const hub = await teamHub(own);
    await addMember(own, hub.id, con, "contributor");
    const res = await own.patch(`/v1/hubs/${hub.id}/members/${con.id.toUpperCase()}`, { role: "viewer" });
    expect(res.status).toBe(200);
    expect(res.body.data.user_id).toBe(con.id);
    const event = await h.db.event.findFirstOrThrow({ where: { hubId: hub.id, type: "member.updated" } });
    expect(event.entityId).toBe(con.id);
  });
});

describe("members per hub", () => {
  it("a hub holds at most ENGRAM_HUB_MAX_MEMBERS members: accepting or adding past it is 409 member_limit_reached, and nothing changes", async () => {
    process.env.ENGRAM_HUB_MAX_MEMBERS = "3";
    try {
      const own = await h.user("Owner");
      const [bea, cy, dan] = [await h.user("Bea"), await h.user("Cy"), await h.user("Dan")];
      const hub = await teamHub(own);
      await addMember(own, hub.id, bea, "contributor");
      const link = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data;
      expect((await cy.post(`/v1/invites/${link.token}/accept`)).status).toBe(200);

      const spare = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data;
      const refused = await dan.post(`/v1/invites/${spare.token}/accept`);
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "member_limit_reached", details: { limit: 3 } });
      // The link is not spent on a join that did not happen.
      expect((await h.db.invite.findUniqueOrThrow({ where: { id: spare.id } })).state).toBe("active");
      const added = await addMemberByEmailInvite(own, hub.id, dan, "viewer");
      expect([added.status, added.body.error?.code]).toEqual([409, "member_limit_reached"]);
      expect(await h.db.hubMember.count({ where: { hubId: hub.id } })).toBe(3);

      // Room again once someone leaves.
      expect((await cy.post(`/v1/hubs/${hub.id}/leave`)).status).toBe(200);
      expect((await dan.post(`/v1/invites/${spare.token}/accept`)).status).toBe(200);
    } finally {
      delete process.env.ENGRAM_HUB_MAX_MEMBERS;
    }
  });
});

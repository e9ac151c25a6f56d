import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNotification } from "@/lib/notifications/create-notification.ts";
import { notificationSummary } from "@/lib/notifications/list-notifications.ts";
import { NOTIFICATION_RETENTION_MS, PRUNABLE_NOTIFICATIONS_SQL, pruneNotifications } from "@/lib/notifications/prune-notifications.ts";
import { resolveNotification } from "@/lib/notifications/update-notification.ts";
import { failMemory } from "@/lib/processing/processing-steps.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";
import { openEventStream, type SseStream } from "./support/sse-client.ts";

let h: Harness;
let ann: Client;
let bob: Client;
let cid: Client;
const streams: SseStream[] = [];

async function inbox(client: Client, query = "") {
  const res = await client.get(`/v1/notifications${query}`);
  expect(res.status, res.text).toBe(200);
  return res.body.data.notifications as any[];
}

async function createTeamHub(owner: Client, name: string) {
  const res = await owner.post("/v1/hubs", { name });
  expect(res.status, res.text).toBe(201);
  return (res.body.data.hub?.id ?? res.body.data.id) as string;
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  cid = await h.user("Cid");
});

afterAll(async () => {
  for (const s of streams) await s.close();
  await h?.close();
});

describe("notifications", () => {
  it("an invite to an existing account's e-mail lands in their inbox, live, and accepting it joins the hub", async () => {
    const hub = await createTeamHub(ann, "Invites hub");
    const bobStream = await openEventStream(bob.key);
    const cidStream = await openEventStream(cid.key);
    const annStream = await openEventStream(ann.key);
    streams.push(bobStream, cidStream, annStream);
    for (const s of [bobStream, cidStream, annStream]) await s.waitFor((e) => e.event === "ready");

    const invite = await ann.post(`/v1/hubs/${hub}/invites`, { role: "viewer", email: bob.email.toUpperCase() });
    expect(invite.status, invite.text).toBe(201);
    const [n] = await inbox(bob);
    expect(n).toMatchObject({
      audience: "user",
      recipient_user_id: bob.id,
      hub_id: hub,
      kind: "hub_invite",
      status: "pending",
      source_kind: "invite",
      source_id: invite.body.data.id,
      payload: { hub: { id: hub, name: "Invites hub" }, inviter: { id: ann.id, display: "Ann" }, role: "viewer", expires_at: expect.any(String) },
    });
    expect(n.seen_at).toBeUndefined();
    const live = await bobStream.waitFor((e) => e.event === "notification.created");
    expect(live.data).toMatchObject({ entity_id: n.id, hub_id: hub, actor_id: ann.id });
    expect(await inbox(cid)).toEqual([]);

    // Dismiss is for receipts; an unknown action names the allowed ones.
    const dismiss = await bob.post(`/v1/notifications/${n.id}/dismiss`);
    expect(dismiss.status).toBe(400);
    expect(dismiss.body.error.code).toBe("dismiss_not_applicable_to_decision");
    const wrong = await bob.post(`/v1/notifications/${n.id}/resolve`, { action: "merge" });
    expect(wrong.body.error).toMatchObject({ code: "invalid_action_for_notification_kind", details: { actions: ["accept", "decline"] } });
    expect((await cid.post(`/v1/notifications/${n.id}/resolve`, { action: "accept" })).status).toBe(404);

    const resolved = await bob.post(`/v1/notifications/${n.id}/resolve`, { action: "accept" });
    expect(resolved.status, resolved.text).toBe(200);
    expect(resolved.body.data).toEqual({ status: "resolved", action: "accept", resolution: "accepted" });
    const detail = await bob.get(`/v1/hubs/${hub}`);
    expect(detail.status).toBe(200);
    expect(detail.body.data.role).toBe("viewer");
    expect(await inbox(bob)).toEqual([]);
    expect((await inbox(bob, "?status=resolved"))[0]).toMatchObject({ id: n.id, status: "resolved", resolution: "accepted", resolved_at: expect.any(String) });
    expect((await bob.post(`/v1/notifications/${n.id}/resolve`, { action: "accept" })).body.error.code).toBe("conflict");

    // The owner hears that Bob joined; nobody else does.
    const joined = (await inbox(ann)).find((x) => x.kind === "hub_member_joined");
    expect(joined).toMatchObject({ hub_id: hub, payload: { member: { id: bob.id, display: "Bob" }, role: "viewer" } });
    await annStream.waitFor((e) => e.event === "notification.created" && e.data.entity_id === joined.id);
    await annStream.waitFor((e) => e.event === "invite.accepted" && e.data.entity_id === invite.body.data.id);
    await annStream.waitFor((e) => e.event === "member.added" && e.data.entity_id === bob.id);
    expect(cidStream.payload()).toEqual([]);
  });

  it("declining an invite closes it without joining", async () => {
    const hub = await createTeamHub(ann, "Declined hub");
    await ann.post(`/v1/hubs/${hub}/invites`, { email: cid.email });
    const [n] = await inbox(cid);
    const res = await cid.post(`/v1/notifications/${n.id}/resolve`, { action: "decline" });
    expect(res.body.data).toEqual({ status: "resolved", action: "decline", resolution: "declined" });
    expect((await cid.get(`/v1/hubs/${hub}`)).status).toBe(404);
    // History by resolution (Memax's repeatable filter).
    const ids = async (query: string) => (await inbox(cid, `?status=resolved&hub=${hub}${query}`)).map((x) => x.id);
    expect(await ids("&resolution=declined")).toEqual([n.id]);
    expect(await ids("&resolution=accepted&resolution=declined")).toEqual([n.id]);
    expect(await ids("&resolution=accepted,kept_a")).toEqual([]);
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: cid.key, fetch: routeFetch });
    const listed = await sdk.notifications.list({ hub, status: "resolved", resolution: ["declined"] });
    expect(listed.notifications.map((x: { id: string }) => x.id)).toEqual([n.id]);
  });

  it("a member added by an admin: the owner is told", async () => {
    const hub = await createTeamHub(ann, "Admin adds");
    // Adding someone by id needs them findable: an invite to their e-mail does it (and is then used up).
    await ann.post(`/v1/hubs/${hub}/invites`, { email: bob.email, role: "admin" });
    expect((await ann.post(`/v1/hubs/${hub}/members`, { user_id: bob.id, role: "admin" })).status).toBe(201);
    await bob.post(`/v1/hubs/${hub}/invites`, { email: cid.email });
    expect((await bob.post(`/v1/hubs/${hub}/members`, { user_id: cid.id, role: "contributor" })).status).toBe(201);
    const joined = (await inbox(ann, `?hub=${hub}&kind=hub_member_joined`)).map((n) => n.payload.member.id);
    expect(joined).toEqual([cid.id]);
    // Bob (the admin who added Cid) is not told about his own action; Cid gets nothing for being added.
    expect(await inbox(bob, `?hub=${hub}`)).toEqual([]);
    expect(await inbox(cid, `?hub=${hub}`)).toEqual([]);
  });

  it("visiting a hub is the read receipt of its updates; decisions and other hubs' updates stay unseen", async () => {
    // People of their own: the other tests count Ann's and Bob's unseen rows.
    const ann = await h.user("Vera");
    const bob = await h.user("Walt");
    const hub = await createTeamHub(ann, "Visited hub");
    const other = await createTeamHub(ann, "Unvisited hub");
    // Bob accepts invites to both: Ann hears of each join.
    for (const hubId of [hub, other]) {
      await ann.post(`/v1/hubs/${hubId}/invites`, { email: bob.email, role: "admin" });
      const [invite] = await inbox(bob, `?hub=${hubId}&kind=hub_invite`);
      expect((await bob.post(`/v1/notifications/${invite.id}/resolve`, { action: "accept" })).status).toBe(200);
    }
    expect((await ann.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: bob.id })).status).toBe(201);
    const unseen = async (client: typeof ann, hubId: string) =>
      (await inbox(client, `?hub=${hubId}&unseen_only=true`)).map((n: { kind: string }) => n.kind).sort();
    expect(await unseen(ann, hub)).toEqual(["hub_member_joined"]);
    expect(await unseen(bob, hub)).toEqual(["hub_ownership_transfer"]);
    expect((await ann.get("/v1/notifications/summary")).body.data.updates_unseen).toBe(2);

    expect((await ann.post(`/v1/hubs/${hub}/visit`)).status).toBe(200);
    expect((await bob.post(`/v1/hubs/${hub}/visit`)).status).toBe(200);
    expect(await unseen(ann, hub)).toEqual([]);
    // Seen is not dismissed: the update is still listed as pending.
    expect((await inbox(ann, `?hub=${hub}`)).map((n: { kind: string }) => n.kind)).toContain("hub_member_joined");
    expect((await ann.get("/v1/notifications/summary")).body.data.updates_unseen).toBe(1);
    expect(await unseen(ann, other)).toEqual(["hub_member_joined"]);
    // Bob's decision is not answered by looking at the hub.
    expect(await unseen(bob, hub)).toEqual(["hub_ownership_transfer"]);
  });

  it("a regenerated invite's notification carries the new expiry and maker, and comes back once the old one had run out", async () => {
    const fay = await h.user("Fay");
    const gus = await h.user("Gus");
    const hal = await h.user("Hal");
    const hub = await createTeamHub(fay, "Regenerated hub");
    const invite = (await fay.post(`/v1/hubs/${hub}/invites`, { email: gus.email, role: "viewer" })).body.data;
    expect((await inbox(gus, `?hub=${hub}`)).map((n) => n.source_id)).toEqual([invite.id]);
    // A week later the invite (and its notification) ran out; another manager regenerates it.
    const past = new Date(Date.now() - 60_000);
    await h.db.invite.update({ where: { id: invite.id }, data: { expiresAt: past } });
    await h.db.notification.updateMany({ where: { sourceId: invite.id }, data: { expiresAt: past } });
    expect(await inbox(gus, `?hub=${hub}`)).toEqual([]);
    const addHal = await fay.post(`/v1/hubs/${hub}/invites`, { email: hal.email, role: "viewer" });
    expect((await fay.post(`/v1/hubs/${hub}/members`, { user_id: hal.id, role: "admin" })).status, addHal.text).toBe(201);
    const fresh = await hal.post(`/v1/hubs/${hub}/invites/${invite.id}/regenerate`);
    expect(fresh.status, fresh.text).toBe(200);
    const [note] = await inbox(gus, `?hub=${hub}`);
    expect(note).toMatchObject({ kind: "hub_invite", source_id: invite.id, expires_at: fresh.body.data.expires_at });
    expect(note.payload).toMatchObject({ expires_at: fresh.body.data.expires_at, inviter: { id: hal.id } });
  });

  it("losing access closes the hub's notifications: a revoked invite, leaving, a deleted hub", async () => {
    const dee = await h.user("Dee");
    const eli = await h.user("Eli");
    const hub = await createTeamHub(dee, "Short-lived hub");
    // A revoked invite: the invitee's decision expires (accepting would only answer 410).
    const first = await dee.post(`/v1/hubs/${hub}/invites`, { email: eli.email, role: "admin" });
    expect((await inbox(eli, `?hub=${hub}`)).map((n) => n.kind)).toEqual(["hub_invite"]);
    expect((await dee.delete(`/v1/hubs/${hub}/invites/${first.body.data.id}`)).status).toBe(200);
    expect(await inbox(eli, `?hub=${hub}`)).toEqual([]);
    expect((await inbox(eli, `?hub=${hub}&status=expired`)).map((n) => n.source_id)).toEqual([first.body.data.id]);

    // Leaving: the offer of ownership aimed at the leaver is canceled, its decision expires with the rest.
    await dee.post(`/v1/hubs/${hub}/invites`, { email: eli.email, role: "admin" });
    const [invite] = await inbox(eli, `?hub=${hub}&kind=hub_invite`);
    expect((await eli.post(`/v1/notifications/${invite.id}/resolve`, { action: "accept" })).status).toBe(200);
    const offer = await dee.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: eli.id });
    expect(offer.status, offer.text).toBe(201);
    const deeStream = await openEventStream(dee.key, `?hub_id=${hub}`);
    streams.push(deeStream);
    await deeStream.waitFor((e) => e.event === "ready");
    expect((await inbox(eli, `?hub=${hub}`)).map((n) => n.kind)).toEqual(["hub_ownership_transfer"]);
    expect((await eli.post(`/v1/hubs/${hub}/leave`)).status).toBe(200);
    expect(await inbox(eli, `?hub=${hub}`)).toEqual([]);
    expect((await dee.get(`/v1/hubs/${hub}`)).body.data.pending_transfer ?? null).toBeNull();
    await deeStream.waitFor((e) => e.event === "transfer.canceled" && e.data.entity_id === offer.body.data.id);

    // A deleted hub takes its notifications along, whatever their state.
    expect((await inbox(dee, `?hub=${hub}`)).map((n) => n.kind)).toContain("hub_member_joined");
    expect((await dee.delete(`/v1/hubs/${hub}`)).status).toBe(200);
    expect(await h.db.notification.count({ where: { hubId: hub } })).toBe(0);
  });

  it("a hub left behind: its rows (names, members, memory titles) are not listed, counted or found, whatever their state", async () => {
    const fay = await h.user("Fay");
    const gil = await h.user("Gil");
    const ida = await h.user("Ida");
    const hub = await h.teamHub(fay, [[gil, "admin"]]);
    // Gil, an admin, hears of Ida joining; a decision and a receipt he dismisses close before he leaves.
    await fay.post(`/v1/hubs/${hub}/invites`, { email: ida.email, role: "viewer" });
    expect((await fay.post(`/v1/hubs/${hub}/members`, { user_id: ida.id, role: "viewer" })).status).toBe(201);
    const [joined] = await inbox(gil, `?hub=${hub}`);
    expect(joined).toMatchObject({ kind: "hub_member_joined", payload: { hub: { name: expect.any(String) }, member: { id: ida.id } } });
    expect((await gil.post(`/v1/notifications/${joined.id}/dismiss`)).status).toBe(200);
    await createNotification(h.db, {
      userId: gil.id,
      hubId: hub,
      kind: "review_contradiction",
      sourceKind: "dream_action",
      sourceId: crypto.randomUUID(),
      payload: { hub: { id: hub, name: "Secret plans" }, memory_a: { id: crypto.randomUUID(), title: "Launch on May 3" } },
    });
    expect((await gil.post(`/v1/hubs/${hub}/leave`)).status).toBe(200);
    // A fan-out that read the hub's admins before the leave committed lands after it.
    const late = await createNotification(h.db, { userId: gil.id, hubId: hub, kind: "hub_member_joined", sourceKind: "hub_member", sourceId: ida.id, payload: { hub: { id: hub, name: "Secret plans" } } });

    for (const status of ["pending", "resolved", "dismissed", "expired"]) {
      expect(await inbox(gil, `?status=${status}`), status).toEqual([]);
      expect(await inbox(gil, `?status=${status}&hub=${hub}`), status).toEqual([]);
    }
    expect((await gil.get("/v1/notifications/summary")).body.data.unseen_total).toBe(0);
    for (const id of [joined.id, late.id]) {
      expect((await gil.post(`/v1/notifications/${id}/seen`)).status).toBe(404);
      expect((await gil.post(`/v1/notifications/${id}/dismiss`)).status).toBe(404);
    }
    // Invited again, he sees the invite (a person is told of a hub they are invited to).
    expect((await fay.post(`/v1/hubs/${hub}/invites`, { invitee: { user_id: gil.id }, role: "viewer" })).status).toBe(201);
    expect((await inbox(gil)).map((n) => n.kind)).toEqual(["hub_invite"]);
  });

  it("ownership transfer: the target decides from the notification, the previous owner hears of the result", async () => {
    const hub = await createTeamHub(ann, "Transfer hub");
    await ann.post(`/v1/hubs/${hub}/invites`, { email: bob.email, role: "admin" });
    await ann.post(`/v1/hubs/${hub}/members`, { user_id: bob.id, role: "admin" });
    const offer = await ann.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: bob.id });
    expect(offer.status, offer.text).toBe(201);
    const [n] = await inbox(bob, `?hub=${hub}`);
    expect(n).toMatchObject({ kind: "hub_ownership_transfer", source_id: offer.body.data.id, payload: { initiator: { id: ann.id }, hub: { id: hub } } });
    expect((await bob.post(`/v1/notifications/${n.id}/resolve`, { action: "accept" })).body.data.resolution).toBe("accepted");
    expect((await bob.get(`/v1/hubs/${hub}`)).body.data.role).toBe("owner");
    const done = (await inbox(ann, `?hub=${hub}&kind=hub_ownership_transferred`))[0];
    expect(done.payload).toMatchObject({ new_owner: { id: bob.id }, old_owner: { id: ann.id } });

    // A declined offer is canceled; a withdrawn one closes the target's row.
    const second = await bob.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: ann.id });
    const [m] = await inbox(ann, `?hub=${hub}&kind=hub_ownership_transfer`);
    expect((await ann.post(`/v1/notifications/${m.id}/resolve`, { action: "decline" })).status).toBe(200);
    const transfer = await bob.get(`/v1/hubs/${hub}`);
    expect(transfer.body.data.pending_transfer ?? null).toBeNull();
    expect(second.status).toBe(201);
    const third = await bob.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: ann.id });
    expect((await bob.post(`/v1/hubs/${hub}/ownership-transfer/${third.body.data.id}/cancel`)).status).toBe(200);
    expect(await inbox(ann, `?hub=${hub}&kind=hub_ownership_transfer`)).toEqual([]);
  });

  it("an action named like an object's built-in (toString, __proto__) is a 400 that changes nothing, not a 500 after declining the offer", async () => {
    const hub = await createTeamHub(ann, "Built-in actions hub");
    await ann.post(`/v1/hubs/${hub}/invites`, { email: cid.email, role: "admin" });
    expect((await ann.post(`/v1/hubs/${hub}/members`, { user_id: cid.id, role: "admin" })).status).toBeLessThan(300);
    const offer = await ann.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: cid.id });
    expect(offer.status, offer.text).toBe(201);
    const [n] = await inbox(cid, `?hub=${hub}&kind=hub_ownership_transfer`);
    for (const action of ["toString", "__proto__", "constructor", "hasOwnProperty"]) {
      const res = await cid.post(`/v1/notifications/${n.id}/resolve`, { action });
      expect([res.status, res.body.error?.code], action).toEqual([400, "invalid_action_for_notification_kind"]);
      expect(res.body.error.details.actions).toEqual(["accept", "decline", "dismiss"]);
    }
    // The offer still stands, and its notification still waits for the decision.
    expect((await h.db.ownershipTransfer.findUniqueOrThrow({ where: { id: offer.body.data.id } })).state).toBe("pending");
    expect((await inbox(cid, `?hub=${hub}&kind=hub_ownership_transfer`)).map((m) => m.id)).toEqual([n.id]);
    expect((await cid.post(`/v1/notifications/${n.id}/resolve`, { action: "accept" })).body.data.resolution).toBe("accepted");
  });

  it("a memory whose processing failed notifies its owner", async () => {
    const res = await cid.post("/v1/memories", { content: "# Scan\n\nunreadable attachment" });
    const memory = await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } });
    await failMemory({ db: h.db, memory, now: () => new Date() }, "Error: extraction failed", { indexed: false });
    const [n] = await inbox(cid, "?kind=memory_processing_failed");
    expect(n).toMatchObject({ kind: "memory_processing_failed", source_id: memory.id, payload: { memory: { id: memory.id, title: "Scan" }, error: "Error: extraction failed" } });
  });

  it("bulk seen and dismiss are narrowed by X-Hub-ID when the body names no hub", async () => {
    const dee = await h.user("Dee");
    const team = await createTeamHub(dee, "Dee's team");
    for (const hubId of [team, undefined]) {
      const res = await dee.post("/v1/memories", { content: `# Scan ${hubId ?? "personal"}\n\nunreadable` }, hubId ? { headers: { "x-hub-id": hubId } } : {});
      expect(res.status, res.text).toBe(201);
      const memory = await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } });
      await failMemory({ db: h.db, memory, now: () => new Date() }, "Error: extraction failed", { indexed: false });
    }
    const kinds = ["memory_processing_failed"];
    expect((await dee.post("/v1/notifications/seen", { kinds }, { headers: { "x-hub-id": team } })).body.data).toEqual({ affected: 1 });
    expect((await inbox(dee, "?unseen_only=true")).map((n) => n.hub_id)).not.toContain(team);
    expect((await dee.post("/v1/notifications/dismiss", { kinds }, { headers: { "x-hub-id": team } })).body.data).toEqual({ affected: 1 });
    expect((await inbox(dee)).length).toBe(1);
    // A hub the caller cannot read narrows to nothing rather than revealing it.
    expect((await bob.post("/v1/notifications/seen", { kinds }, { headers: { "x-hub-id": team } })).body.data.affected ?? 0).toBe(0);
    expect((await dee.post("/v1/notifications/seen", { kinds })).body.data).toEqual({ affected: 1 });
  });

  it("bulk dismiss marks the rows seen as a single dismiss does, keeping an earlier seen_at", async () => {
    const fay = await h.user("Fay");
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const res = await fay.post("/v1/memories", { content: `# Scan ${n}\n\nunreadable` });
      expect(res.status, res.text).toBe(201);
      const memory = await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } });
      await failMemory({ db: h.db, memory, now: () => new Date() }, "Error: extraction failed", { indexed: false });
      ids.push(res.body.data.id);
    }
    const [seenFirst, unseen] = await inbox(fay);
    expect((await fay.post(`/v1/notifications/${seenFirst.id}/seen`)).status).toBe(200);
    const seenAt = (await inbox(fay)).find((n) => n.id === seenFirst.id).seen_at;
    expect(seenAt).toBeDefined();
    expect((await fay.post("/v1/notifications/dismiss", { kinds: ["memory_processing_failed"] })).body.data).toEqual({ affected: 2 });
    const dismissed = await inbox(fay, "?status=dismissed");
    expect(dismissed.find((n) => n.id === seenFirst.id).seen_at).toBe(seenAt);
    expect(dismissed.find((n) => n.id === unseen.id).seen_at).toEqual(expect.any(String));
    expect((await fay.get("/v1/notifications/summary")).body.data.updates_unseen).toBe(0);
  });

  it("seen, dismiss, unseen_only, summary, cursor pages and validation", async () => {
    // Unknown parameters are ignored with a warning, as on every list (decisions.md).
    const flavoured = await ann.get("/v1/notifications?flavour=vanilla&kind=hub_invite&kind=hub_member_joined");
    expect([flavoured.status, flavoured.headers.get("x-engram-warning")]).toEqual([200, "ignored unknown query parameters: flavour"]);
    expect((await ann.get("/v1/notifications/summary?colour=red")).headers.get("x-engram-warning")).toBe("ignored unknown query parameters: colour");
    expect((await ann.get("/v1/notifications/summary")).headers.get("x-engram-warning")).toBeNull();
    const summaryBefore = (await ann.get("/v1/notifications/summary")).body.data;
    expect(summaryBefore.by_kind.hub_invite).toEqual({ pending: 0, unseen: 0 });
    const receipts = await inbox(ann);
    expect(receipts.length).toBeGreaterThanOrEqual(3);
    expect(summaryBefore.updates_unseen).toBe(receipts.length);
    const first = receipts[0];
    expect((await ann.post(`/v1/notifications/${first.id}/seen`)).body.data).toEqual({ status: "seen" });
    expect((await ann.post(`/v1/notifications/${first.id}/seen`)).body.data).toEqual({ status: "seen" });
    expect((await inbox(ann, "?unseen_only=true")).map((n) => n.id)).not.toContain(first.id);
    expect((await ann.get("/v1/notifications/summary")).body.data.updates_unseen).toBe(receipts.length - 1);
    expect((await ann.post(`/v1/notifications/${first.id}/dismiss`)).body.data).toEqual({ status: "dismissed" });
    expect((await inbox(ann)).map((n) => n.id)).not.toContain(first.id);
    expect((await inbox(ann, "?status=dismissed")).map((n) => n.id)).toEqual([first.id]);

    const p1 = await ann.get("/v1/notifications?limit=1");
    expect(p1.body.data.has_more).toBe(true);
    const p2 = await ann.get(`/v1/notifications?limit=1&cursor=${encodeURIComponent(p1.body.data.next_cursor)}`);
    expect(p2.body.data.notifications[0].id).not.toBe(p1.body.data.notifications[0].id);
    expect((await bob.get(`/v1/notifications?limit=1&cursor=${encodeURIComponent(p1.body.data.next_cursor)}`)).body.error.code).toBe("invalid_cursor");
    expect((await ann.get("/v1/notifications?status=bogus")).status).toBe(400);
    expect((await ann.get("/v1/notifications?limit=0")).body.error.code).toBe("invalid_limit");
    expect((await ann.post(`/v1/notifications/not-an-id/seen`)).status).toBe(404);

    const bulk = await ann.post("/v1/notifications/seen", { kinds: ["hub_member_joined", "hub_ownership_transferred"] });
    expect(bulk.body.data.affected).toBeGreaterThan(0);
    expect((await ann.post("/v1/notifications/dismiss", { kinds: ["hub_invite"] })).body.error.code).toBe("bulk_not_allowed_for_decision_kind");
  });

  it("a since before year 1 lists everything and one past 9999 nothing, not a 500", async () => {
    const all = (await inbox(ann, "?status=dismissed")).map((n) => n.id);
    expect(all.length).toBeGreaterThan(0);
    for (const early of ["0000-01-01T00:00:00Z", "-010000-01-01T00:00:00Z"]) {
      expect((await inbox(ann, `?status=dismissed&since=${encodeURIComponent(early)}`)).map((n) => n.id)).toEqual(all);
    }
    expect(await inbox(ann, `?status=dismissed&since=${encodeURIComponent("+275000-01-01T00:00:00Z")}`)).toEqual([]);
  });

  it("the summary's counts are of one moment: a row arriving while it counts is in both pending and unseen, or in neither", async () => {
    const jon = await h.user("Jon");
    const failed = (hubId: string) => createNotification(h.db, { userId: jon.id, hubId, kind: "memory_processing_failed", sourceKind: "memory", sourceId: crypto.randomUUID() });
    await failed(jon.personalHubId);
    // Another request's row commits right after the summary's first count.
    let counted = 0;
    const db = new Proxy(h.db, {
      get(target, key) {
        if (key !== "notification") return Reflect.get(target, key);
        return new Proxy(target.notification, {
          get: (model, method) =>
            method === "groupBy"
              ? async (args: any) => {
                  const result = await (model.groupBy as any)(args);
                  if (counted++ === 0) await failed(jon.personalHubId);
                  return result;
                }
              : Reflect.get(model, method),
        });
      },
    }) as typeof h.db;
    const summary = await notificationSummary(sessionContext(h, jon, db), {});
    expect([{ pending: 1, unseen: 1 }, { pending: 2, unseen: 2 }]).toContainEqual(summary.by_kind.memory_processing_failed);
    expect(summary.updates_unseen).toBe(summary.updates_pending);
  });

  it("Memax's SDK reads the list and the summary", async () => {
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: routeFetch });
    const list = await sdk.notifications.list({ kind: ["hub_member_joined"], limit: 5 });
    expect(list.notifications.length).toBeGreaterThan(0);
    expect(list.notifications.every((n: any) => n.kind === "hub_member_joined")).toBe(true);
    const summary = await sdk.notifications.summary();
    expect(typeof summary.needs_action_pending).toBe("number");
    expect(await sdk.notifications.markSeen(list.notifications[0].id)).toEqual({ status: "seen" });
  });

  it("an invite addressed to a user id lands in that user's inbox (Memax's invitee: { user_id })", async () => {
    const dee = await h.user("Dee");
    const hub = await createTeamHub(ann, "Invitee hub");
    const invite = await ann.post(`/v1/hubs/${hub}/invites`, { role: "contributor", invitee: { user_id: dee.id } });
    expect(invite.status, invite.text).toBe(201);
    expect(invite.body.data).toMatchObject({ invitee_user_id: dee.id, email: null });
    const mine = (await inbox(dee)).filter((n: { source_id: string }) => n.source_id === invite.body.data.id);
    expect(mine).toMatchObject([{ recipient_user_id: dee.id, hub_id: hub, kind: "hub_invite", status: "pending", payload: { role: "contributor" } }]);
    expect((await inbox(bob)).filter((n: { source_id: string }) => n.source_id === invite.body.data.id)).toEqual([]);
    // An id that is no account gets the same answer: the invite tells nobody which ids exist.
    const nobody = "01900000-0000-7000-8000-000000000001";
    const blind = await ann.post(`/v1/hubs/${hub}/invites`, { role: "contributor", invitee: { user_id: nobody } });
    expect(blind.status, blind.text).toBe(201);
    expect(blind.body.data).toMatchObject({ invitee_user_id: nobody, email: null });
  });
});

describe("notification pages", () => {
  it("follow the API's list rule: 20 by default, at most 100 however many are asked for", async () => {
    const dee = await h.user("Dee");
    // 105 receipts, written as any area records them (createNotification inside its transaction).
    await h.db.$transaction(async (tx) => {
      for (let i = 0; i < 105; i++) await createNotification(tx, { userId: dee.id, kind: "hub_member_joined", sourceKind: "hub", payload: { n: i } });
    });
    const first = await dee.get("/v1/notifications");
    expect(first.body.data.notifications).toHaveLength(20);
    expect(first.body.data.has_more).toBe(true);
    const most = await dee.get("/v1/notifications?limit=1000");
    expect(most.status).toBe(200);
    expect(most.body.data.notifications).toHaveLength(100);
    const rest = await dee.get(`/v1/notifications?limit=1000&cursor=${encodeURIComponent(most.body.data.next_cursor)}`);
    expect(rest.body.data.notifications).toHaveLength(5);
    expect(rest.body.data).toMatchObject({ has_more: false, next_cursor: "" });
  });
});

describe("a checklist dismissed while its last item is ticked", () => {
  it("a tick that resolved it first makes the dismissal a 409, never a 200 for a dismissal that was not stored", async () => {
    const eli = await h.user("Eli");
    const id = (await eli.post("/v1/onboarding/restart", {})).body.data.id as string;
    for (const item of ["first_memory", "connect_agent", "first_recall"]) expect((await eli.post(`/v1/notifications/${id}/items/${item}/complete`, {})).status).toBe(200);
    // The last tick lands after the dismissal read the row pending, before it writes.
    const db = changedBefore(h.db, ["$transaction", "notification.updateMany"], async () => {
      expect((await eli.post(`/v1/notifications/${id}/items/five_memories/complete`, {})).body.data.auto_resolved).toBe(true);
    });
    await expect(resolveNotification(sessionContext(h, eli, db), id, "dismiss")).rejects.toMatchObject({ code: "conflict", details: { status: "resolved", resolution: "applied_auto" } });
    expect(await h.db.notification.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: "resolved", resolution: "applied_auto" });
  });
});

describe("old notifications", () => {
  it("rows no longer pending for over 30 days are deleted by the hourly prune; pending, recent and the latest checklist stay", async () => {
    const gus = await h.user("Gus");
    const now = new Date();
    const long = new Date(now.getTime() - NOTIFICATION_RETENTION_MS - 60_000);
    const recent = new Date(now.getTime() - NOTIFICATION_RETENTION_MS + 86_400_000);
    const row = async (name: string, data: { status?: string; resolvedAt?: Date; expiresAt?: Date; createdAt?: Date; kind?: "checklist"; sourceId?: string }) => {
      const { id } = await createNotification(h.db, {
        userId: gus.id,
        kind: data.kind ?? "hub_member_joined",
        sourceKind: data.kind ? "onboarding" : "hub_member",
        sourceId: data.sourceId ?? name,
        expiresAt: data.expiresAt ?? null,
        now: data.createdAt ?? long,
      });
      if (data.status) await h.db.notification.update({ where: { id }, data: { status: data.status, resolvedAt: data.resolvedAt ?? null } });
      return [name, id] as const;
    };
    const ids = Object.fromEntries([
      await row("resolved long ago", { status: "resolved", resolvedAt: long }),
      await row("dismissed long ago", { status: "dismissed", resolvedAt: long }),
      await row("expired long ago", { status: "expired", resolvedAt: long }),
      await row("ran out long ago", { expiresAt: long }),
      await row("pending, old", {}),
      await row("ran out recently", { expiresAt: recent }),
      await row("dismissed recently", { status: "dismissed", resolvedAt: recent }),
      await row("checklist v1", { kind: "checklist", sourceId: "v1", status: "resolved", resolvedAt: long }),
      await row("checklist v2", { kind: "checklist", sourceId: "v2", status: "resolved", resolvedAt: long }),
    ]);
    expect(await pruneNotifications(h.database, now)).toBe(5);
    const left = await h.db.notification.findMany({ where: { userId: gus.id }, select: { id: true } });
    const names = Object.entries(ids).filter(([, id]) => left.some((r) => r.id === id)).map(([name]) => name);
    expect(names.sort()).toEqual(["checklist v2", "dismissed recently", "pending, old", "ran out recently"]);
    // The latest checklist is still what the onboarding state reports, and a restart numbers the next after it.
    expect((await gus.get("/v1/onboarding/state")).body.data).toMatchObject({ has_prior: true, current_version: 2 });
    expect(await pruneNotifications(h.database, now)).toBe(0);
  });

  it("the prune reads its rows through indexes, not a scan of the whole table", async () => {
    const hal = await h.user("Hal");
    const now = new Date();
    // Many live rows (pending ones with and without an expiry, recently settled ones), few past retention.
    await h.database.sql.query(
      `INSERT INTO notifications (id, user_id, kind, status, source_kind, source_id, payload, created_at, resolved_at, expires_at)
       SELECT gen_random_uuid(), $1::uuid, 'hub_member_joined', CASE WHEN i % 3 = 0 THEN 'resolved' ELSE 'pending' END, 'hub_member', i::text, '{}',
              $2::timestamptz - (i % 1000) * interval '1 minute',
              CASE WHEN i % 3 = 0 THEN $2::timestamptz - (i % 1000) * interval '1 minute' END,
              CASE WHEN i % 3 = 1 THEN $2::timestamptz + interval '7 days' END
       FROM generate_series(1, 30000) AS i`,
      [hal.id, now.toISOString()],
    );
    await h.database.sql.exec("ANALYZE notifications");
    const cutoff = new Date(now.getTime() - NOTIFICATION_RETENTION_MS).toISOString();
    const plan = (await h.database.sql.query<{ "QUERY PLAN": string }>(`EXPLAIN ${PRUNABLE_NOTIFICATIONS_SQL}`, [cutoff, "checklist", "onboarding", 1000]))
      .map((row) => row["QUERY PLAN"])
      .join("\n");
    // Before, no index held the predicate: every hourly run read every row of every person's history.
    expect(plan).not.toMatch(/Seq Scan on notifications n\b/);
    expect(plan).toMatch(/notifications_prune_settled_idx/);
    expect(plan).toMatch(/notifications_prune_pending_idx/);
    expect(await pruneNotifications(h.database, now)).toBe(0);
  });
});

describe("invite notifications are bounded", () => {
  it("one live row per hub per invitee: invite/revoke loops and many open links replace it, and the newest still accepts", async () => {
    const eve = await h.user("Eve");
    const hub = await createTeamHub(ann, "Looping hub");
    let last = "";
    for (let i = 0; i < 25; i++) {
      const invite = await ann.post(`/v1/hubs/${hub}/invites`, { role: "viewer", invitee: { user_id: eve.id } });
      expect(invite.status, invite.text).toBe(201);
      last = invite.body.data.id;
      // Every other one is revoked: the loop that made a new row each time; the rest stay open.
      if (i % 2 === 1) expect((await ann.delete(`/v1/hubs/${hub}/invites/${last}`)).status).toBe(200);
    }
    expect(await h.db.notification.count({ where: { userId: eve.id, hubId: hub, kind: "hub_invite" } })).toBe(1);
    const [row] = await inbox(eve, `?hub=${hub}`);
    expect(row).toMatchObject({ kind: "hub_invite", status: "pending", source_id: last });
    const accepted = await eve.post(`/v1/notifications/${row.id}/resolve`, { action: "accept" });
    expect(accepted.status, accepted.text).toBe(200);
    expect(await h.db.hubMember.count({ where: { hubId: hub, userId: eve.id } })).toBe(1);
  });

  it("one inviter's invites across many hubs reach one person's inbox at most 10 at a time; others' still arrive", async () => {
    const fay = await h.user("Fay");
    const spammer = await h.user("Spammer");
    for (let i = 0; i < 12; i++) {
      const hub = await createTeamHub(spammer, `Spam ${i}`);
      expect((await spammer.post(`/v1/hubs/${hub}/invites`, { role: "viewer", invitee: { user_id: fay.id } })).status).toBe(201);
    }
    expect(await h.db.notification.count({ where: { userId: fay.id, kind: "hub_invite" } })).toBe(10);
    const legit = await createTeamHub(ann, "Legit hub");
    const invite = await ann.post(`/v1/hubs/${legit}/invites`, { role: "viewer", invitee: { user_id: fay.id } });
    expect(invite.status).toBe(201);
    expect((await inbox(fay, `?hub=${legit}`)).map((n) => n.source_id)).toEqual([invite.body.data.id]);
  });

  it("an invite the inviter's cap keeps out of the inbox leaves another admin's earlier row for that hub in place", async () => {
    const gil = await h.user("Gil");
    const spammer = await h.user("Spammer");
    for (let i = 0; i < 10; i++) {
      const hub = await createTeamHub(spammer, `Full ${i}`);
      expect((await spammer.post(`/v1/hubs/${hub}/invites`, { role: "viewer", invitee: { user_id: gil.id } })).status).toBe(201);
    }
    const shared = await createTeamHub(ann, "Shared hub");
    expect((await ann.post(`/v1/hubs/${shared}/invites`, { role: "viewer", email: spammer.email })).status).toBe(201);
    expect((await ann.post(`/v1/hubs/${shared}/members`, { user_id: spammer.id, role: "admin" })).status).toBe(201);
    const earlier = await ann.post(`/v1/hubs/${shared}/invites`, { role: "viewer", invitee: { user_id: gil.id } });
    expect(earlier.status).toBe(201);
    // The spammer's own invite into the same hub is past their cap: made, but no in-app row.
    expect((await spammer.post(`/v1/hubs/${shared}/invites`, { role: "viewer", invitee: { user_id: gil.id } })).status).toBe(201);
    const rows = await inbox(gil, `?hub=${shared}`);
    expect(rows.map((n) => [n.source_id, n.payload.inviter.id])).toEqual([[earlier.body.data.id, ann.id]]);
    const accepted = await gil.post(`/v1/notifications/${rows[0].id}/resolve`, { action: "accept" });
    expect(accepted.status, accepted.text).toBe(200);
  });

  it("regenerating an invite counts the regenerator's cap: past it, a row that had run out stays out of the inbox", async () => {
    const ida = await h.user("Ida");
    const spammer = await h.user("Spammer");
    for (let i = 0; i < 10; i++) {
      const hub = await createTeamHub(spammer, `Capped ${i}`);
      expect((await spammer.post(`/v1/hubs/${hub}/invites`, { role: "viewer", invitee: { user_id: ida.id } })).status).toBe(201);
    }
    const shared = await createTeamHub(ann, "Regenerated shared hub");
    expect((await ann.post(`/v1/hubs/${shared}/invites`, { role: "viewer", email: spammer.email })).status).toBe(201);
    expect((await ann.post(`/v1/hubs/${shared}/members`, { user_id: spammer.id, role: "admin" })).status).toBe(201);
    const invite = (await ann.post(`/v1/hubs/${shared}/invites`, { role: "viewer", invitee: { user_id: ida.id } })).body.data;
    const past = new Date(Date.now() - 60_000);
    await h.db.invite.update({ where: { id: invite.id }, data: { expiresAt: past } });
    await h.db.notification.updateMany({ where: { sourceId: invite.id }, data: { expiresAt: past } });
    const fresh = await spammer.post(`/v1/hubs/${shared}/invites/${invite.id}/regenerate`);
    expect(fresh.status, fresh.text).toBe(200);
    // The link works; the in-app row would have been the spammer's 11th live one.
    expect(await inbox(ida, `?hub=${shared}`)).toEqual([]);
    const live = await inbox(ida, "?limit=100");
    expect(live.filter((n) => n.kind === "hub_invite" && n.payload.inviter.id === spammer.id)).toHaveLength(10);
    // Under the cap, regenerating revives the row (as before).
    const other = await createTeamHub(ann, "Regenerated under cap");
    const second = (await ann.post(`/v1/hubs/${other}/invites`, { role: "viewer", invitee: { user_id: ida.id } })).body.data;
    await h.db.invite.update({ where: { id: second.id }, data: { expiresAt: past } });
    await h.db.notification.updateMany({ where: { sourceId: second.id }, data: { expiresAt: past } });
    expect((await ann.post(`/v1/hubs/${other}/invites/${second.id}/regenerate`)).status).toBe(200);
    expect((await inbox(ida, `?hub=${other}`)).map((n) => [n.source_id, n.payload.inviter.id])).toEqual([[second.id, ann.id]]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSdk, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * Memax's own SDK, unchanged, against Engram's production build: one test per
 * method of its hubs and invites resources that maps to an Engram endpoint,
 * each checking what the SDK's types promise and the state behind it. The
 * tests run in order and build on each other (one hub's life).
 */
describe("Memax SDK: hubs and invites", () => {
  let engram: Engram;
  let ada: EngramUser;
  let bo: EngramUser;
  let cy: EngramUser;
  let sdk: (user: EngramUser) => any;
  let MemaxError: new (...args: any[]) => Error;
  let hubId = "";
  let slug = "";
  let inviteId = "";
  let inviteToken = "";
  let transferId = "";

  beforeAll(async () => {
    engram = await startEngram({ ENGRAM_INVITE_RESEND_SECONDS: "0" });
    [ada, bo, cy] = [await engram.user("Ada"), await engram.user("Bo"), await engram.user("Cy")];
    const loaded = await loadSdk();
    MemaxError = loaded.MemaxError;
    sdk = (user) => new loaded.Memax({ apiUrl: engram.url, apiKey: user.key });
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("hubs.create", async () => {
    const hub = await sdk(ada).hubs.create("Team Rocket");
    expect(hub).toMatchObject({ name: "Team Rocket", slug: "team-rocket", hub_type: "team", owner_id: ada.id });
    hubId = hub.id;
    slug = hub.slug;
  });

  it("hubs.checkSlug", async () => {
    expect(await sdk(ada).hubs.checkSlug(slug)).toMatchObject({ available: false, reason: "taken" });
    expect(await sdk(ada).hubs.checkSlug("free-slug-here")).toMatchObject({ available: true });
  });

  it("hubs.list", async () => {
    const hubs = await sdk(ada).hubs.list();
    expect(Array.isArray(hubs)).toBe(true);
    expect(hubs.map((e: any) => e.hub.hub_type).sort()).toEqual(["personal", "team"]);
    expect(hubs.find((e: any) => e.hub.id === hubId)).toMatchObject({ role: "owner", memory_count: 0, member_count: 1, hub: { slug } });
  });

  it("hubs.update", async () => {
    const hub = await sdk(ada).hubs.update(hubId, {
      name: "Team Rocket HQ",
      icon: "rocket",
      accent: "violet",
      header_aurora_mode: "time",
      allow_contributor_topics: true,
      settings: { dreams_enabled: true },
    });
    expect(hub).toMatchObject({ id: hubId, name: "Team Rocket HQ", icon: "rocket", accent: "violet", header_aurora_mode: "time", settings: { dreams_enabled: true } });
    expect((await ada.api("GET", `/v1/hubs/${hubId}`)).body.data.hub).toMatchObject({ icon: "rocket", allow_contributor_topics: true });
  });

  it("hubs.createInvite", async () => {
    const invite = await sdk(ada).hubs.createInvite(hubId, { role: "contributor", invitee: { email: bo.email } });
    expect(invite).toMatchObject({ hub_id: hubId, role: "contributor", invited_by: ada.id, invitee_email: bo.email.toLowerCase() });
    expect(invite.token).toMatch(/^egi_/);
    expect(invite.invite_url).toContain(`/invite/${invite.token}`);
    inviteId = invite.id;
    inviteToken = invite.token;
    const byId = await sdk(ada).hubs.createInvite(hubId, { role: "viewer", invitee: { user_id: cy.id } });
    expect(byId).toMatchObject({ role: "viewer", invitee_user_id: cy.id });
  });

  it("hubs.listInvites", async () => {
    const invites = await sdk(ada).hubs.listInvites(hubId);
    expect(Array.isArray(invites)).toBe(true);
    expect(invites.map((i: any) => i.id)).toContain(inviteId);
    expect(JSON.stringify(invites)).not.toContain(inviteToken);
  });

  it("invites.get", async () => {
    const details = await sdk(cy).invites.get(inviteToken);
    expect(details).toMatchObject({ invited_by: "Ada", member_count: 1, hub: { id: hubId, name: "Team Rocket HQ" }, invite: { id: inviteId, role: "contributor" } });
  });

  it("invites.accept", async () => {
    const joined = await sdk(bo).invites.accept(inviteToken);
    expect(joined).toMatchObject({ role: "contributor", hub: { id: hubId } });
    expect((await bo.api("GET", "/v1/hubs")).body.data.map((e: any) => e.hub.id)).toContain(hubId);
  });

  it("hubs.get", async () => {
    const detail = await sdk(bo).hubs.get(hubId);
    expect(detail.role).toBe("contributor");
    const [owner, member] = detail.members;
    expect(owner).toMatchObject({ user_id: ada.id, user_name: "Ada", role: "owner" });
    // A contributor sees other members' e-mails masked, and their own.
    expect(owner.user_email).not.toBe(ada.email);
    expect(owner.user_email).toMatch(/^a•••@example\.test$/);
    expect(member).toMatchObject({ user_id: bo.id, user_email: bo.email, role: "contributor" });
    expect((await sdk(ada).hubs.get(hubId)).members[1].user_email).toBe(bo.email);
  });

  it("hubs.summary", async () => {
    await bo.api("POST", "/v1/memories", { content: "A first shared note" }, { "x-hub-id": hubId });
    const summary = await sdk(ada).hubs.summary(hubId);
    expect(summary).toMatchObject({ role: "owner", hub: { id: hubId }, stats: { memories: 1, topics: 0, inbox: 1, pending_review: 0 } });
    expect(summary.header).toMatchObject({ state: expect.any(String), greeting_key: expect.stringMatching(/[AB]$/), time_bucket: expect.any(String) });
  });

  it("hubs.markVisit", async () => {
    expect(await sdk(bo).hubs.markVisit(hubId)).toMatchObject({ status: "ok", hub_id: hubId });
  });

  it("hubs.updateMemberRole", async () => {
    expect(await sdk(ada).hubs.updateMemberRole(hubId, bo.id, "admin")).toMatchObject({ status: "updated", user_id: bo.id, role: "admin" });
    expect((await sdk(bo).hubs.get(hubId)).role).toBe("admin");
  });

  it("hubs.regenerateInvite", async () => {
    const link = await sdk(ada).hubs.createInvite(hubId, { role: "viewer" });
    const fresh = await sdk(ada).hubs.regenerateInvite(hubId, link.id);
    expect(fresh).toMatchObject({ id: link.id, role: "viewer" });
    expect(fresh.token).not.toBe(link.token);
    await expect(sdk(cy).invites.get(link.token)).rejects.toBeInstanceOf(MemaxError);
  });

  it("hubs.resendInvite", async () => {
    const mailed = await sdk(ada).hubs.createInvite(hubId, { role: "viewer", invitee: { email: "dee@example.test" } });
    const resent = await sdk(ada).hubs.resendInvite(hubId, mailed.id);
    expect(resent).toMatchObject({ status: expect.stringMatching(/^(sent|logged)$/), email_enqueued_at: expect.any(String) });
  });

  it("hubs.revokeInvite", async () => {
    const invites = await sdk(ada).hubs.listInvites(hubId);
    const target = invites.find((i: any) => i.invitee_user_id === cy.id);
    expect(await sdk(ada).hubs.revokeInvite(hubId, target.id)).toMatchObject({ status: "revoked", invite_id: target.id });
    expect((await sdk(ada).hubs.listInvites(hubId)).map((i: any) => i.id)).not.toContain(target.id);
  });

  it("hubs.createOwnershipTransfer", async () => {
    const transfer = await sdk(ada).hubs.createOwnershipTransfer(hubId, bo.id);
    expect(transfer).toMatchObject({ hub_id: hubId, initiated_by: ada.id, target_user_id: bo.id, accepted_at: null, cancelled_at: null });
    transferId = transfer.id;
  });

  it("hubs.cancelOwnershipTransfer", async () => {
    expect(await sdk(bo).hubs.cancelOwnershipTransfer(hubId, transferId)).toMatchObject({ status: "canceled", transfer_id: transferId });
    expect((await ada.api("GET", `/v1/hubs/${hubId}`)).body.data.pending_transfer).toBeNull();
  });

  it("hubs.acceptOwnershipTransfer", async () => {
    const offer = await sdk(ada).hubs.createOwnershipTransfer(hubId, bo.id);
    const accepted = await sdk(bo).hubs.acceptOwnershipTransfer(hubId, offer.id);
    expect(accepted).toMatchObject({ id: offer.id, accepted_at: expect.any(String), cancelled_at: null });
    expect((await sdk(bo).hubs.get(hubId)).role).toBe("owner");
    expect((await sdk(ada).hubs.get(hubId)).role).toBe("admin");
  });

  it("hubs.removeMember", async () => {
    const invite = await sdk(bo).hubs.createInvite(hubId, { role: "viewer" });
    await sdk(cy).invites.accept(invite.token);
    expect(await sdk(bo).hubs.removeMember(hubId, cy.id)).toMatchObject({ status: "removed", user_id: cy.id });
    expect((await cy.api("GET", `/v1/hubs/${hubId}`)).status).toBe(404);
  });

  it("hubs.leave", async () => {
    expect(await sdk(ada).hubs.leave(hubId)).toMatchObject({ status: "left", hub_id: hubId });
    expect((await ada.api("GET", "/v1/hubs")).body.data.map((e: any) => e.hub.id)).not.toContain(hubId);
  });

  it("hubs.delete", async () => {
    expect(await sdk(bo).hubs.delete(hubId)).toMatchObject({ deleted: true, hub_id: hubId });
    expect((await bo.api("GET", `/v1/hubs/${hubId}`)).status).toBe(404);
  });
});

import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { createHash } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { resetConfig } from "@/lib/config.ts";
import { createHarness, frozenLimiter, type Client, type Harness } from "./support/harness.ts";
import { MAIL_RETENTION_MS, pruneMailOutbox } from "@/lib/mail/prune-mail-outbox.ts";
import { INVITE_RETENTION_MS, pruneInvites } from "@/lib/invites/prune-invites.ts";
import { addMemberByEmailInvite } from "./support/add-member.ts";
import { startSmtp } from "./support/smtp-fake.ts";

let h: Harness;
beforeAll(async () => {
  process.env.ENGRAM_PUBLIC_URL = "https://engram.example.com/";
  resetConfig();
  h = await createHarness();
});
afterAll(async () => {
  delete process.env.ENGRAM_PUBLIC_URL;
  resetConfig();
  await h?.close();
});
afterEach(() => {
  delete process.env.SMTP_URL;
});

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/** The message body with quoted-printable soft breaks undone. */
const decoded = (data: string) => data.replace(/=\r\n/g, "").replace(/=3D/g, "=");

async function team(owner: Client) {
  const res = await owner.post("/v1/hubs", { name: `Invites ${Math.random().toString(36).slice(2, 8)}` });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; name: string; slug: string };
}

describe("create and list", () => {
  it("creates an invite with a one-time token stored only hashed and a public invite_url", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    const res = await own.post(`/v1/hubs/${hub.id}/invites`);
    expect(res.status).toBe(201);
    const invite = res.body.data;
    expect(invite).toMatchObject({
      hub_id: hub.id,
      role: "contributor",
      email: null,
      created_by: own.id,
      invited_by: own.id,
      invitee_user_id: null,
      invitee_email: null,
      state: "active",
      last_sent_at: null,
      email_enqueued_at: null,
      accepted_by: null,
    });
    expect(invite.token).toMatch(/^egi_[A-Za-z0-9_-]{43}$/);
    expect(invite.invite_url).toBe(`https://engram.example.com/invite/${invite.token}`);
    expect(new Date(invite.expires_at).getTime() - new Date(invite.created_at).getTime()).toBe(7 * 24 * 3600 * 1000);
    const row = await h.db.invite.findUniqueOrThrow({ where: { id: invite.id } });
    expect(row.tokenHash).toBe(sha256(invite.token));
    expect(JSON.stringify(row)).not.toContain(invite.token);

    const list = await own.get(`/v1/hubs/${hub.id}/invites`);
    expect(list.status).toBe(200);
    // One array: at most 20 active invites per hub.
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0]).toMatchObject({ id: invite.id, role: "contributor", invited_by: own.id });
    expect(list.body.data[0]).not.toHaveProperty("token");
    expect(list.body.data[0]).not.toHaveProperty("invite_url");
    expect(list.text).not.toContain(invite.token);
  });

  it("follows roles: admins invite contributors and viewers, only the owner invites admins", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const con = await h.user("Contrib");
    const out = await h.user("Out");
    const hub = await team(own);
    await addMemberByEmailInvite(own, hub.id, adm, "admin");
    await addMemberByEmailInvite(own, hub.id, con, "contributor");
    expect((await adm.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).status).toBe(201);
    expect((await adm.post(`/v1/hubs/${hub.id}/invites`, { role: "admin" })).status).toBe(403);
    expect((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "admin" })).status).toBe(201);
    expect((await con.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).status).toBe(403);
    expect((await con.get(`/v1/hubs/${hub.id}/invites`)).status).toBe(403);
    expect((await out.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).status).toBe(404);
    expect((await out.get(`/v1/hubs/${hub.id}/invites`)).status).toBe(404);
    for (const body of [{ role: "owner" }, { role: "viewer", email: "nope" }]) {
      const res = await own.post(`/v1/hubs/${hub.id}/invites`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
  });

  it("allows at most 20 active invites, counting concurrent creates; revoking frees a slot", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    const ids: string[] = [];
    for (let i = 0; i < 18; i++) ids.push((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data.id);
    const racing = await Promise.all([0, 1, 2, 3].map(() => own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 409, 409]);
    const refused = racing.find((r) => r.status === 409)!;
    expect(refused.body.error).toMatchObject({ code: "invite_limit_reached", details: { limit: 20 } });
    expect(await h.db.invite.count({ where: { hubId: hub.id } })).toBe(20);

    // The whole list in one array, newest first, whatever limit a client sends.
    const all = await own.get(`/v1/hubs/${hub.id}/invites?limit=5`);
    expect(all.body.data).toHaveLength(20);
    expect(new Set(all.body.data.map((i: { id: string }) => i.id)).size).toBe(20);
    const created = all.body.data.map((i: { created_at: string }) => i.created_at);
    expect(created).toEqual([...created].sort().reverse());

    const revoked = await own.delete(`/v1/hubs/${hub.id}/invites/${ids[0]}`);
    expect(revoked.body.data).toEqual({ id: ids[0], invite_id: ids[0], revoked: true, status: "revoked" });
    expect((await own.delete(`/v1/hubs/${hub.id}/invites/${ids[0]}`)).status).toBe(200);
    expect((await own.get(`/v1/hubs/${hub.id}/invites`)).body.data).toHaveLength(19);
    expect((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).status).toBe(201);
  });
});

describe("invitation e-mails", () => {
  // ENGRAM_INVITE_EMAILS_PER_HOUR (default 100), lowered to keep the test short.
  const MAX_INVITE_EMAILS_PER_HOUR = 50;
  afterEach(() => {
    delete process.env.ENGRAM_INVITE_EMAILS_PER_HOUR;
  });
  it("one member mails at most 50 an hour, creates and resends, across hubs, deleted ones counted; link invites stay free", async () => {
    process.env.ENGRAM_INVITE_EMAILS_PER_HOUR = String(MAX_INVITE_EMAILS_PER_HOUR);
    const own = await h.user("Mailer");
    const [first, second] = [await team(own), await team(own)];
    // Create and revoke (past the 20 active invites of a hub), then delete the hub: none of it gives mail back.
    for (let i = 0; i < 40; i++) {
      const made = await own.post(`/v1/hubs/${first.id}/invites`, { role: "viewer", email: `someone-${i}@example.test` });
      expect(made.status, made.text).toBe(201);
      expect((await own.delete(`/v1/hubs/${first.id}/invites/${made.body.data.id}`)).status).toBe(200);
    }
    expect((await own.delete(`/v1/hubs/${first.id}`)).status).toBe(200);
    const kept: string[] = [];
    for (let i = 40; i < MAX_INVITE_EMAILS_PER_HOUR - 1; i++) {
      const made = await own.post(`/v1/hubs/${second.id}/invites`, { role: "viewer", email: `someone-${i}@example.test` });
      expect(made.status, made.text).toBe(201);
      kept.push(made.body.data.id);
    }
    // A resend is a mail too (its once-a-minute throttle passed: the last send an hour's minute ago).
    const resend = () => own.post(`/v1/hubs/${second.id}/invites/${kept[0]}/resend`);
    await h.db.invite.update({ where: { id: kept[0] }, data: { lastSentAt: new Date(Date.now() - 120_000) } });
    expect((await resend()).status).toBe(200);
    const refused = await own.post(`/v1/hubs/${second.id}/invites`, { role: "viewer", email: "one-more@example.test" });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: "rate_limited", details: { limit: MAX_INVITE_EMAILS_PER_HOUR } });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3000);
    expect(await h.db.invite.count({ where: { email: "one-more@example.test" } })).toBe(0);
    expect(await h.db.mailOutbox.count({ where: { toAddress: "one-more@example.test" } })).toBe(0);
    await h.db.invite.update({ where: { id: kept[1] }, data: { lastSentAt: new Date(Date.now() - 120_000) } });
    const again = await own.post(`/v1/hubs/${second.id}/invites/${kept[1]}/resend`);
    expect([again.status, again.body.error?.code]).toEqual([429, "rate_limited"]);
    expect(await h.db.mailOutbox.count({ where: { senderId: own.id, kind: "invite" } })).toBe(MAX_INVITE_EMAILS_PER_HOUR);
    // A link invite mails nobody, and another member's invitations are their own.
    expect((await own.post(`/v1/hubs/${second.id}/invites`, { role: "viewer" })).status).toBe(201);
    const other = await h.user("Other mailer");
    const theirs = await team(other);
    expect((await other.post(`/v1/hubs/${theirs.id}/invites`, { role: "viewer", email: "one-more@example.test" })).status).toBe(201);
  });
});

describe("public view and accept", () => {
  it("shows the join page data without a credential, and 404 for unknown tokens", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    const invite = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data;
    const res = await h.anonymous.get(`/v1/invites/${invite.token}`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      invite: { id: invite.id, hub_id: hub.id, role: "viewer", created_at: invite.created_at, expires_at: invite.expires_at, state: "active" },
      hub: { id: hub.id, name: hub.name, slug: hub.slug, hub_type: "team", owner_id: own.id },
      member_count: 1,
      // The inviter's name as a string (Memax SDK InviteDetails).
      invited_by: "Owner",
    });
    expect(res.headers.get("x-ratelimit-limit")).toBeTruthy();
    expect((await h.anonymous.get(`/v1/invites/egi_${"x".repeat(43)}`)).status).toBe(404);
    expect((await h.anonymous.get("/v1/invites/garbage")).status).toBe(404);
  });

  it("rate-limits the public view per client address", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    const token = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data.token;
    setRateLimiter(frozenLimiter({ regular: 3, heavy: 3, light: 3 }));
    try {
      const from = (ip: string) => h.anonymous.get(`/v1/invites/${token}`, { headers: { [SOCKET_ADDRESS_HEADER]: ip } });
      for (let i = 0; i < 3; i++) expect((await from("203.0.113.7")).status).toBe(200);
      const limited = await from("203.0.113.7");
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe("rate_limited");
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await from("198.51.100.1")).status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1_000_000, heavy: 1_000_000, light: 1_000_000 }));
    }
  });

  it("accept joins with the invite's role once; used, revoked, expired and already-member answers", async () => {
    const own = await h.user("Owner");
    const bob = await h.user("Bob");
    const cat = await h.user("Cat");
    const hub = await team(own);
    const invite = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data;

    expect((await h.anonymous.post(`/v1/invites/${invite.token}/accept`)).status).toBe(401);
    const member = await own.post(`/v1/invites/${invite.token}/accept`);
    expect(member.status).toBe(409);
    expect(member.body.error.code).toBe("already_member");

    const accepted = await bob.post(`/v1/invites/${invite.token}/accept`);
    expect(accepted.status).toBe(200);
    expect(accepted.body.data.role).toBe("viewer");
    expect(accepted.body.data.hub).toMatchObject({ id: hub.id, name: hub.name, slug: hub.slug, hub_type: "team" });
    expect((await bob.get(`/v1/hubs/${hub.id}`)).body.data.role).toBe("viewer");

    const reused = await cat.post(`/v1/invites/${invite.token}/accept`);
    expect(reused.status).toBe(410);
    expect(reused.body.error.code).toBe("used");
    expect((await h.anonymous.get(`/v1/invites/${invite.token}`)).body.data.invite.state).toBe("accepted");
    expect((await own.delete(`/v1/hubs/${hub.id}/invites/${invite.id}`)).body.error.code).toBe("used");

    const revoked = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    await own.delete(`/v1/hubs/${hub.id}/invites/${revoked.id}`);
    const r = await cat.post(`/v1/invites/${revoked.token}/accept`);
    expect([r.status, r.body.error.code]).toEqual([410, "revoked"]);

    const old = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    await h.db.invite.update({ where: { id: old.id }, data: { expiresAt: new Date(Date.now() - 1) } });
    const e = await cat.post(`/v1/invites/${old.token}/accept`);
    expect([e.status, e.body.error.code]).toEqual([410, "expired"]);
    expect((await h.anonymous.get(`/v1/invites/${old.token}`)).body.data.invite.state).toBe("expired");
    expect((await own.get(`/v1/hubs/${hub.id}/invites`)).body.data.map((i: { id: string }) => i.id)).not.toContain(old.id);
    expect(await h.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: cat.id } } })).toBeNull();
  });

  it("two simultaneous accepts of one invite: exactly one membership, the other 410 used", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    const token = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "contributor" })).body.data.token;
    const racers = [await h.user("R1"), await h.user("R2"), await h.user("R3")];
    const results = await Promise.all(racers.map((u) => u.post(`/v1/invites/${token}/accept`)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 410, 410]);
    expect(results.filter((r) => r.status === 410).every((r) => r.body.error.code === "used")).toBe(true);
    expect(await h.db.hubMember.count({ where: { hubId: hub.id, userId: { in: racers.map((u) => u.id) } } })).toBe(1);
  });
});

describe("an invite counts only while its maker may still grant it", () => {
  it("an admin removed from the hub cannot come back through a link they made; an owner's invite still works", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const guest = await h.user("Guest");
    const hub = (await own.post("/v1/hubs", { name: "Invite makers" })).body.data.id as string;
    expect((await addMemberByEmailInvite(own, hub, adm, "admin")).status).toBe(201);
    const admins = (await adm.post(`/v1/hubs/${hub}/invites`, { role: "contributor" })).body.data.token as string;
    const owners = (await own.post(`/v1/hubs/${hub}/invites`, { role: "contributor" })).body.data.token as string;
    expect((await own.delete(`/v1/hubs/${hub}/members/${adm.id}`)).status).toBe(200);
    const back = await adm.post(`/v1/invites/${admins}/accept`);
    expect(back.status).toBe(410);
    expect(back.body.error.code).toBe("revoked");
    expect(await h.db.hubMember.count({ where: { hubId: hub, userId: adm.id } })).toBe(0);
    // The link stays unused (still active): nothing was claimed.
    expect((await h.db.invite.findFirstOrThrow({ where: { hubId: hub, createdBy: adm.id } })).state).toBe("active");
    expect((await guest.post(`/v1/invites/${owners}/accept`)).status).toBe(200);
  });

  it("an admin invite made by an owner who has since handed the hub over no longer makes admins", async () => {
    const own = await h.user("Owner");
    const next = await h.user("Next");
    const guest = await h.user("Guest");
    const hub = (await own.post("/v1/hubs", { name: "Handed over" })).body.data.id as string;
    expect((await addMemberByEmailInvite(own, hub, next, "admin")).status).toBe(201);
    const adminInvite = (await own.post(`/v1/hubs/${hub}/invites`, { role: "admin" })).body.data.token as string;
    const transfer = (await own.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: next.id })).body.data.id as string;
    expect((await next.post(`/v1/hubs/${hub}/ownership-transfer/${transfer}/accept`)).status).toBe(200);
    const res = await guest.post(`/v1/invites/${adminInvite}/accept`);
    expect(res.status).toBe(410);
    expect(await h.db.hubMember.count({ where: { hubId: hub, userId: guest.id } })).toBe(0);
  });
});

describe("a member who can invite again", () => {
  it("re-added or promoted, does not bring their old links back to life past the hub's 20", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const guest = await h.user("Guest");
    const hub = await team(own);
    expect((await addMemberByEmailInvite(own, hub.id, adm, "admin")).status).toBe(201);
    const madeBy = async (who: Client, count: number) => {
      const tokens: string[] = [];
      for (let i = 0; i < count; i++) {
        const res = await who.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" });
        expect(res.status, res.text).toBe(201);
        tokens.push(res.body.data.token);
      }
      return tokens;
    };
    const usable = async () => (await own.get(`/v1/hubs/${hub.id}`)).body.data.counts.invites as number;

    // Demoted: their 20 links stop counting, the owner fills the slots, then they are promoted again.
    const before = await madeBy(adm, 20);
    expect((await own.patch(`/v1/hubs/${hub.id}/members/${adm.id}`, { role: "contributor" })).status).toBe(200);
    await madeBy(own, 20);
    expect((await own.patch(`/v1/hubs/${hub.id}/members/${adm.id}`, { role: "admin" })).status).toBe(200);
    expect(await usable()).toBe(20);
    const dead = await guest.post(`/v1/invites/${before[0]}/accept`);
    expect([dead.status, dead.body.error?.code]).toEqual([410, "revoked"]);

    // Removed and re-added: the same.
    const open = (await own.get(`/v1/hubs/${hub.id}/invites`)).body.data as { id: string; state: string }[];
    for (const invite of open.filter((i) => i.state === "active")) await own.delete(`/v1/hubs/${hub.id}/invites/${invite.id}`);
    const again = await madeBy(adm, 20);
    expect((await own.delete(`/v1/hubs/${hub.id}/members/${adm.id}`)).status).toBe(200);
    await madeBy(own, 19);
    expect((await addMemberByEmailInvite(own, hub.id, adm, "admin")).status).toBe(201);
    expect(await usable()).toBe(19);
    const gone = await guest.post(`/v1/invites/${again[0]}/accept`);
    expect([gone.status, gone.body.error?.code]).toEqual([410, "revoked"]);
  });
});

describe("dead invites", () => {
  it("revoked, accepted and expired invites are deleted by the hourly prune after their retention; live and recent ones stay", async () => {
    const own = await h.user("Owner");
    const joiner = await h.user("Joiner");
    const hub = await team(own);
    const make = async () => (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data as { id: string; token: string };
    const [live, revoked, accepted, expired, recent] = [await make(), await make(), await make(), await make(), await make()];
    await own.delete(`/v1/hubs/${hub.id}/invites/${revoked.id}`);
    expect((await joiner.post(`/v1/invites/${accepted.token}/accept`)).status).toBe(200);
    await own.delete(`/v1/hubs/${hub.id}/invites/${recent.id}`);
    // Within the retention a dead link still answers: the join page's view with its state (200), accept 410;
    // the hub's invite list shows only the live ones (`expired` runs out below).
    expect((await h.anonymous.get(`/v1/invites/${recent.token}`)).body.data.invite).toMatchObject({ id: recent.id, state: "revoked" });
    expect((await joiner.post(`/v1/invites/${recent.token}/accept`)).status).toBe(410);
    expect((await own.get(`/v1/hubs/${hub.id}/invites`)).body.data.map((i: { id: string }) => i.id).sort()).toEqual([live.id, expired.id].sort());
    const longAgo = new Date(Date.now() - INVITE_RETENTION_MS - 60_000);
    await h.db.invite.update({ where: { id: revoked.id }, data: { revokedAt: longAgo } });
    await h.db.invite.update({ where: { id: accepted.id }, data: { acceptedAt: longAgo } });
    await h.db.invite.update({ where: { id: expired.id }, data: { expiresAt: longAgo } });
    expect(await pruneInvites(h.database)).toBe(3);
    const left = await h.db.invite.findMany({ where: { hubId: hub.id }, select: { id: true } });
    expect(left.map((i) => i.id).sort()).toEqual([live.id, recent.id].sort());
    // A pruned link answers like an unknown one.
    expect((await h.anonymous.get(`/v1/invites/${revoked.token}`)).status).toBe(404);
    // The membership the accepted one made is untouched.
    expect(await h.db.hubMember.count({ where: { hubId: hub.id, userId: joiner.id } })).toBe(1);
  });
});

describe("regenerate and resend", () => {
  it("regenerate issues a new token and kills the old one; revives an expired invite, not a revoked one", async () => {
    const own = await h.user("Owner");
    const bob = await h.user("Bob");
    const hub = await team(own);
    const invite = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    const fresh = await own.post(`/v1/hubs/${hub.id}/invites/${invite.id}/regenerate`);
    expect(fresh.status).toBe(200);
    expect(fresh.body.data.id).toBe(invite.id);
    expect(fresh.body.data.token).not.toBe(invite.token);
    expect(fresh.body.data.invite_url).toContain(fresh.body.data.token);
    expect((await h.anonymous.get(`/v1/invites/${invite.token}`)).status).toBe(404);
    expect((await bob.post(`/v1/invites/${invite.token}/accept`)).status).toBe(404);
    expect((await bob.post(`/v1/invites/${fresh.body.data.token}/accept`)).status).toBe(200);
    expect((await own.post(`/v1/hubs/${hub.id}/invites/${invite.id}/regenerate`)).body.error.code).toBe("used");

    const expired = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    await h.db.invite.update({ where: { id: expired.id }, data: { expiresAt: new Date(Date.now() - 1) } });
    const revived = await own.post(`/v1/hubs/${hub.id}/invites/${expired.id}/regenerate`);
    expect(revived.body.data.state).toBe("active");
    expect(new Date(revived.body.data.expires_at).getTime()).toBeGreaterThan(Date.now() + 6 * 24 * 3600 * 1000);

    const revoked = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    await own.delete(`/v1/hubs/${hub.id}/invites/${revoked.id}`);
    const dead = await own.post(`/v1/hubs/${hub.id}/invites/${revoked.id}/regenerate`);
    expect([dead.status, dead.body.error.code]).toEqual([410, "revoked"]);
    expect((await own.post(`/v1/hubs/${hub.id}/invites/${crypto.randomUUID()}/regenerate`)).status).toBe(404);
  });

  it("resend needs an e-mail; the embedded default keeps the message in mail_outbox, its link redacted there and in the log", async () => {
    const logged: string[] = [];
    const info = vi.spyOn(console, "info").mockImplementation((...args: unknown[]) => void logged.push(args.join(" ")));
    const own = await h.user("Owner");
    const hub = await team(own);
    const bare = (await own.post(`/v1/hubs/${hub.id}/invites`)).body.data;
    const noEmail = await own.post(`/v1/hubs/${hub.id}/invites/${bare.id}/resend`);
    expect([noEmail.status, noEmail.body.error.code]).toEqual([400, "no_email"]);

    const created = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "Guest@Example.test" });
    const invite = created.body.data;
    expect(invite.email).toBe("guest@example.test");
    expect(invite.delivery).toMatchObject({ transport: "outbox", status: "logged" });
    const tooSoon = await own.post(`/v1/hubs/${hub.id}/invites/${invite.id}/resend`);
    expect(tooSoon.status).toBe(429);
    expect(tooSoon.headers.get("retry-after")).toBeTruthy();

    await h.db.invite.update({ where: { id: invite.id }, data: { lastSentAt: new Date(Date.now() - 61_000) } });
    const resent = await own.post(`/v1/hubs/${hub.id}/invites/${invite.id}/resend`);
    expect(resent.status).toBe(200);
    expect(resent.body.data).not.toHaveProperty("token");
    expect(resent.body.data.delivery).toMatchObject({ transport: "outbox", status: "logged" });
    const outbox = await h.db.mailOutbox.findMany({ where: { hubId: hub.id }, orderBy: { createdAt: "asc" } });
    expect(outbox).toHaveLength(2);
    info.mockRestore();
    // Issue 18 #1: the link is a bearer capability; neither the table nor the log may hold it.
    const link = `/invite/${invite.token}`;
    expect(logged.filter((line) => line.includes("[mail] invite"))).toHaveLength(2);
    for (const line of logged) expect(line).not.toContain(invite.token);
    for (const mail of outbox) {
      expect(mail).toMatchObject({ toAddress: "guest@example.test", kind: "invite", sentAt: null, error: null });
      expect(mail.body).not.toContain(invite.token);
      expect(mail.body).toContain(`/invite/${invite.token.slice(0, 8)}…[redacted]`);
      expect(invite.invite_url).toContain(link);
    }
    expect(logged.join("\n")).toContain(`/invite/${invite.token.slice(0, 8)}…[redacted]`);
    expect(outbox[1]!.id).toBe(resent.body.data.delivery.outbox_id);
  });

  it("GET /v1/hubs/:id/mail lists the hub's outbox to its managers, newest first, paged, links redacted", async () => {
    const own = await h.user("Owner");
    const con = await h.user("Contrib");
    const hub = await team(own);
    const other = await team(own);
    await addMemberByEmailInvite(own, hub.id, con, "contributor"); // its invite is the oldest mail
    const sent = [];
    for (const name of ["a", "b", "c"]) sent.push((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: `${name}@example.test` })).body.data);
    await own.post(`/v1/hubs/${other.id}/invites`, { role: "viewer", email: "elsewhere@example.test" });

    const first = await own.get(`/v1/hubs/${hub.id}/mail?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.data.mail.map((m: { to: string }) => m.to)).toEqual(["c@example.test", "b@example.test"]);
    expect(first.body.data.has_more).toBe(true);
    expect(first.body.data.mail[0]).toMatchObject({ kind: "invite", status: "logged", error: null, sent_at: null, subject: expect.stringContaining(hub.name) });
    expect(first.body.data.mail[0].body).toContain(`/invite/${sent[2].token.slice(0, 8)}…[redacted]`);
    expect(first.body.data.mail[0].body).not.toContain(sent[2].token);
    const rest = await own.get(`/v1/hubs/${hub.id}/mail?limit=2&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(rest.body.data.mail.map((m: { to: string }) => m.to)).toEqual(["a@example.test", con.email]);
    expect(rest.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    // A cursor from one hub's outbox is no cursor for another's.
    const crossed = await own.get(`/v1/hubs/${other.id}/mail?cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect([crossed.status, crossed.body.error.code]).toEqual([400, "invalid_cursor"]);

    expect((await con.get(`/v1/hubs/${hub.id}/mail`)).status).toBe(403);
    const outsider = await h.user("Outsider");
    expect((await outsider.get(`/v1/hubs/${hub.id}/mail`)).status).toBe(404);
  });

  it("keeps outbox rows 90 days: the hourly prune removes older ones in batches, newer ones stay", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    for (const name of ["old-1", "old-2", "old-3", "new"]) await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: `${name}@example.test` });
    const day = 24 * 60 * 60_000;
    await h.db.mailOutbox.updateMany({ where: { hubId: hub.id, toAddress: { startsWith: "old-" } }, data: { createdAt: new Date(Date.now() - MAIL_RETENTION_MS - day) } });
    await h.db.mailOutbox.updateMany({ where: { hubId: hub.id, toAddress: "new@example.test" }, data: { createdAt: new Date(Date.now() - MAIL_RETENTION_MS + day) } });
    // One batch of one row per statement, two statements: two of the three old rows go, the next run takes the third.
    expect(await pruneMailOutbox(h.database, new Date(), 2, 1)).toBe(2);
    expect(await h.db.mailOutbox.count({ where: { hubId: hub.id } })).toBe(2);
    expect(await pruneMailOutbox(h.database)).toBeGreaterThanOrEqual(1);
    const left = await own.get(`/v1/hubs/${hub.id}/mail`);
    expect(left.body.data.mail.map((m: { to: string }) => m.to)).toEqual(["new@example.test"]);
  });

  it("the migration scrubs invite links that older versions left in mail_outbox", async () => {
    const token = `egi_${"A".repeat(43)}`;
    const id = crypto.randomUUID();
    await h.db.mailOutbox.create({ data: { id, toAddress: "old@example.test", subject: "s", body: `Open http://x/invite/${token}\nbye`, kind: "invite" } });
    const sql = readFileSync(path.join(process.cwd(), "prisma/migrations/20261122163600_redact_mail_outbox/migration.sql"), "utf8");
    await h.database.sql.exec(sql);
    const row = await h.db.mailOutbox.findUniqueOrThrow({ where: { id } });
    expect(row.body).toBe("Open http://x/invite/egi_AAAA…[redacted]\nbye");
  });

  it("with SMTP_URL, create and resend deliver the same link over SMTP", async () => {
    const smtp = await startSmtp();
    process.env.SMTP_URL = smtp.url;
    process.env.MAIL_FROM = "Engram <hub@engram.test>";
    try {
      const own = await h.user("Owner");
      const hub = await team(own);
      const created = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "contributor", email: "dev@example.test" });
      expect(created.status).toBe(201);
      expect(created.body.data.delivery).toMatchObject({ transport: "smtp", status: "sent" });
      await h.db.invite.update({ where: { id: created.body.data.id }, data: { lastSentAt: new Date(Date.now() - 61_000) } });
      const resent = await own.post(`/v1/hubs/${hub.id}/invites/${created.body.data.id}/resend`);
      expect(resent.status).toBe(200);
      expect(resent.body.data.delivery).toMatchObject({ transport: "smtp", status: "sent" });

      expect(smtp.messages).toHaveLength(2);
      for (const message of smtp.messages) {
        expect(message.from).toContain("<hub@engram.test>");
        expect(message.to).toEqual(["RCPT TO:<dev@example.test>"]);
        const body = decoded(message.data);
        expect(body).toMatch(/^Subject: .*Owner_invited_you_to/m);
        expect(body).toContain(`Owner invited you to join the hub "${hub.name}" on Engram as a contributor.`);
        expect(body).toContain(created.body.data.invite_url);
      }
      const rows = await h.db.mailOutbox.findMany({ where: { hubId: hub.id } });
      expect(rows.every((row) => row.sentAt !== null && row.error === null)).toBe(true);
      for (const row of rows) expect(row.body).not.toContain(created.body.data.token);
    } finally {
      delete process.env.MAIL_FROM;
      await smtp.close();
    }
  });

  it("a relay that cannot be reached: the hub's mail list says so without naming the relay's host or port", async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    process.env.SMTP_URL = `smtp://relay-user:relay-pass@127.0.0.1:${port}`;
    try {
      const own = await h.user("Owner");
      const hub = await team(own);
      const created = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "someone@example.test" });
      expect(created.body.data.delivery).toMatchObject({ transport: "smtp", status: "failed" });
      const [mail] = (await own.get(`/v1/hubs/${hub.id}/mail`)).body.data.mail;
      expect(mail).toMatchObject({ status: "failed", error: expect.stringMatching(/could not reach the mail server/) });
      expect(mail.error).not.toContain("127.0.0.1");
      expect(mail.error).not.toContain(String(port));
    } finally {
      delete process.env.SMTP_URL;
    }
  });

  it("an SMTP refusal answers 503 and leaves the error in the outbox", async () => {
    const smtp = await startSmtp({ rejectRcpt: true });
    process.env.SMTP_URL = smtp.url;
    try {
      const own = await h.user("Owner");
      const hub = await team(own);
      const created = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "nobody@example.test" });
      expect(created.status).toBe(201);
      expect(created.body.data.delivery).toMatchObject({ transport: "smtp", status: "failed" });
      expect(created.body.data.last_sent_at).toBeNull();
      const resent = await own.post(`/v1/hubs/${hub.id}/invites/${created.body.data.id}/resend`);
      expect(resent.status).toBe(503);
      expect(resent.body.error.code).toBe("unavailable");
      const row = await h.db.mailOutbox.findUniqueOrThrow({ where: { id: resent.body.error.details.outbox_id } });
      expect(row.sentAt).toBeNull();
      expect(row.error).toMatch(/550/);
      // The throttle slot was handed back, so a retry is not refused as too soon.
      expect((await h.db.invite.findUniqueOrThrow({ where: { id: created.body.data.id } })).lastSentAt).toBeNull();
      const retry = await own.post(`/v1/hubs/${hub.id}/invites/${created.body.data.id}/resend`);
      expect(retry.status).toBe(503);
      expect(await h.db.mailOutbox.count({ where: { hubId: hub.id, error: { not: null } } })).toBe(3);
    } finally {
      await smtp.close();
    }
  });

  it("admins cannot regenerate or resend admin invites; contributors manage none", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const con = await h.user("Contrib");
    const hub = await team(own);
    await addMemberByEmailInvite(own, hub.id, adm, "admin");
    await addMemberByEmailInvite(own, hub.id, con, "contributor");
    const adminInvite = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "admin", email: "a@example.test" })).body.data;
    expect((await adm.post(`/v1/hubs/${hub.id}/invites/${adminInvite.id}/regenerate`)).status).toBe(403);
    expect((await adm.post(`/v1/hubs/${hub.id}/invites/${adminInvite.id}/resend`)).status).toBe(403);
    expect((await con.delete(`/v1/hubs/${hub.id}/invites/${adminInvite.id}`)).status).toBe(403);
    expect((await adm.delete(`/v1/hubs/${hub.id}/invites/${adminInvite.id}`)).status).toBe(200);
    const other = await team(adm);
    expect((await adm.delete(`/v1/hubs/${other.id}/invites/${adminInvite.id}`)).status).toBe(404);
  });
});

describe("an address nobody has proven", () => {
  it("an invite e-mailed to an address an unproven sign-up holds neither reaches that account in-app nor lets it be added by id", async () => {
    const own = await h.user("Owner");
    const squatter = await h.user("Squatter");
    // What a password sign-up with someone else's address leaves: the account holds it, nothing proved it.
    const address = `victim-${Math.random().toString(36).slice(2, 8)}@example.test`;
    await h.db.user.update({ where: { id: squatter.id }, data: { email: address, emailUnverified: true } });
    const hub = await team(own);
    const invite = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "contributor", email: address });
    expect(invite.status).toBe(201);
    // The link goes to the mailbox; the account squatting the address gets no in-app invite to accept.
    const inbox = await squatter.get(`/v1/notifications?hub=${hub.id}`);
    expect(inbox.status).toBe(200);
    expect(inbox.body.data.notifications).toEqual([]);
    expect(inbox.text).not.toContain(hub.name);
    // Nor does the e-mailed invite vouch for that account when the owner adds it by id.
    const added = await own.post(`/v1/hubs/${hub.id}/members`, { user_id: squatter.id, role: "contributor" });
    expect(added.status).toBe(404);
    expect(await h.db.hubMember.count({ where: { hubId: hub.id, userId: squatter.id } })).toBe(0);
    expect((await h.db.invite.findUniqueOrThrow({ where: { id: invite.body.data.id } })).state).toBe("active");

    // Once the address is proven, the account is its owner's: the in-app invite and the add work again.
    await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: false } });
    await own.post(`/v1/hubs/${hub.id}/invites`, { role: "contributor", email: address });
    const proven = await squatter.get(`/v1/notifications?hub=${hub.id}`);
    expect(proven.body.data.notifications.map((n: { kind: string }) => n.kind)).toEqual(["hub_invite"]);
    expect((await own.post(`/v1/hubs/${hub.id}/members`, { user_id: squatter.id, role: "contributor" })).status).toBe(201);
  });
});

describe("an invite whose maker can no longer invite", () => {
  it("resend mails no dead link (410 revoked); regenerate makes the regenerator its maker, so the new link works", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const guest = await h.user("Guest");
    const hub = await team(own);
    expect((await addMemberByEmailInvite(own, hub.id, adm, "admin")).status).toBe(201);
    const made = (await adm.post(`/v1/hubs/${hub.id}/invites`, { role: "contributor", email: "later@example.test" })).body.data;
    expect((await own.delete(`/v1/hubs/${hub.id}/members/${adm.id}`)).status).toBe(200);
    await h.db.invite.update({ where: { id: made.id }, data: { lastSentAt: new Date(Date.now() - 61_000) } });
    const mailed = await h.db.mailOutbox.count({ where: { hubId: hub.id } });

    // The join page says revoked up front, as accepting would; so does the hub's own invite list.
    expect((await h.anonymous.get(`/v1/invites/${made.token}`)).body.data.invite.state).toBe("revoked");
    const listed = (await own.get(`/v1/hubs/${hub.id}/invites`)).body.data as { id: string; state: string }[];
    expect(listed.find((invite) => invite.id === made.id)?.state).toBe("revoked");
    // Its link answers 410 revoked, so mailing it again would only send a dead link.
    const resent = await own.post(`/v1/hubs/${hub.id}/invites/${made.id}/resend`);
    expect([resent.status, resent.body.error?.code]).toEqual([410, "revoked"]);
    expect(await h.db.mailOutbox.count({ where: { hubId: hub.id } })).toBe(mailed);

    // Regenerating is the owner issuing a new link: it speaks for them now, and it works.
    const renewed = await own.post(`/v1/hubs/${hub.id}/invites/${made.id}/regenerate`);
    expect(renewed.status).toBe(200);
    expect(renewed.body.data).toMatchObject({ created_by: own.id, invited_by: own.id });
    const joined = await guest.post(`/v1/invites/${renewed.body.data.token}/accept`);
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body.data.role).toBe("contributor");
    expect((await h.anonymous.get(`/v1/invites/${renewed.body.data.token}`)).body.data.invite.state).toBe("accepted");
  });
});

describe("a link that no longer works", () => {
  it("revoked, expired, used and maker-departed invites answer the SDK's full InviteDetails, their state saying the link is dead", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const bob = await h.user("Bob");
    const hub = await team(own);
    expect((await addMemberByEmailInvite(own, hub.id, adm, "admin")).status).toBe(201);
    const make = async (by: Client = own) => (await by.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.data as { id: string; token: string; created_at: string };
    const revoked = await make();
    await own.delete(`/v1/hubs/${hub.id}/invites/${revoked.id}`);
    const expired = await make();
    const past = new Date(Date.now() - 1);
    await h.db.invite.update({ where: { id: expired.id }, data: { expiresAt: past } });
    const used = await make();
    expect((await bob.post(`/v1/invites/${used.token}/accept`)).status).toBe(200);
    const orphaned = await make(adm);
    expect((await own.delete(`/v1/hubs/${hub.id}/members/${adm.id}`)).status).toBe(200);

    for (const [made, state, inviter] of [[revoked, "revoked", "Owner"], [expired, "expired", "Owner"], [used, "accepted", "Owner"], [orphaned, "revoked", "Admin"]] as const) {
      const res = await h.anonymous.get(`/v1/invites/${made.token}`);
      expect(res.status, state).toBe(200);
      const row = await h.db.invite.findUniqueOrThrow({ where: { id: made.id } });
      expect(res.body.data, state).toEqual({
        invite: { id: made.id, hub_id: hub.id, role: "viewer", created_at: made.created_at, expires_at: row.expiresAt.toISOString(), state },
        hub: { id: hub.id, name: hub.name, slug: hub.slug, hub_type: "team", owner_id: own.id },
        member_count: 2,
        invited_by: inviter,
      });
    }
    const live = await h.anonymous.get(`/v1/invites/${(await make()).token}`);
    expect(live.body.data).toMatchObject({ invite: { state: "active" }, hub: { id: hub.id, name: hub.name }, invited_by: "Owner" });
  });
});

describe("links of a member who can no longer invite", () => {
  it("neither admit anyone nor take one of the hub's 20 slots; the list shows them apart, bounded", async () => {
    const own = await h.user("Owner");
    const adm = await h.user("Admin");
    const guest = await h.user("Guest");
    const hub = await team(own);
    expect((await addMemberByEmailInvite(own, hub.id, adm, "admin")).status).toBe(201);
    const admins: { id: string; token: string }[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await adm.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" });
      expect(res.status).toBe(201);
      admins.push(res.body.data);
    }
    expect((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.error?.code).toBe("invite_limit_reached");
    expect((await own.delete(`/v1/hubs/${hub.id}/members/${adm.id}`)).status).toBe(200);

    // The departed admin's links let no one in...
    const refused = await guest.post(`/v1/invites/${admins[0]!.token}/accept`);
    expect([refused.status, refused.body.error?.code]).toEqual([410, "revoked"]);
    // ...so they no longer hold the hub's slots: the owner can invite again, up to 20 usable links.
    const owners: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" });
      expect(res.status, res.text).toBe(201);
      owners.push(res.body.data.id);
    }
    expect((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).body.error?.code).toBe("invite_limit_reached");
    expect((await own.get(`/v1/hubs/${hub.id}`)).body.data.counts.invites).toBe(20);

    // Every usable link is listed (none pushed out by dead ones), then the dead ones, as revoked, for regenerating.
    const listed = (await own.get(`/v1/hubs/${hub.id}/invites`)).body.data as { id: string; state: string }[];
    expect(listed.filter((i) => i.state === "active").map((i) => i.id).sort()).toEqual([...owners].sort());
    expect(listed.filter((i) => i.state === "revoked").length).toBe(20);
    expect(listed.length).toBeLessThanOrEqual(40);
    // Regenerating one makes it usable again, so it needs a free slot like a new link.
    const revived = await own.post(`/v1/hubs/${hub.id}/invites/${admins[1]!.id}/regenerate`);
    expect([revived.status, revived.body.error?.code]).toEqual([409, "invite_limit_reached"]);
    await own.delete(`/v1/hubs/${hub.id}/invites/${owners[0]}`);
    expect((await own.post(`/v1/hubs/${hub.id}/invites/${admins[1]!.id}/regenerate`)).status).toBe(200);
    expect((await own.get(`/v1/hubs/${hub.id}`)).body.data.counts.invites).toBe(20);
  });
});

describe("invitation e-mails need a proven sender", () => {
  it("with SMTP_URL, an account whose address nothing proved gets 403 for mailing an invite (create or resend) and nothing is sent; link invites still work", async () => {
    const smtp = await startSmtp();
    process.env.SMTP_URL = smtp.url;
    try {
      const own = await h.user("Owner");
      const hub = await team(own);
      const earlier = (await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "first@example.test" })).body.data;
      await h.db.invite.update({ where: { id: earlier.id }, data: { lastSentAt: new Date(Date.now() - 61_000) } });
      const mailed = await h.db.mailOutbox.count({ where: { senderId: own.id } });
      const sent = smtp.messages.length;
      const invites = await h.db.invite.count({ where: { hubId: hub.id } });
      // What a password sign-up leaves until the address is proven (an e-mail code, a provider that vouches for it).
      await h.db.user.update({ where: { id: own.id }, data: { emailUnverified: true } });

      for (const body of [{ role: "viewer", email: "stranger@example.test" }, { role: "viewer", invitee: { email: "stranger@example.test" } }]) {
        const res = await own.post(`/v1/hubs/${hub.id}/invites`, body);
        expect(res.status, JSON.stringify(body)).toBe(403);
        expect(res.body.error.code).toBe("forbidden");
        expect(res.body.error.message).toMatch(/proven/);
      }
      const resent = await own.post(`/v1/hubs/${hub.id}/invites/${earlier.id}/resend`);
      expect([resent.status, resent.body.error?.code]).toEqual([403, "forbidden"]);
      expect(await h.db.mailOutbox.count({ where: { senderId: own.id } })).toBe(mailed);
      expect(smtp.messages.length).toBe(sent);
      expect(await h.db.invite.count({ where: { hubId: hub.id } })).toBe(invites);

      expect((await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer" })).status).toBe(201);
      await h.db.user.update({ where: { id: own.id }, data: { emailUnverified: false } });
      expect((await own.post(`/v1/hubs/${hub.id}/invites/${earlier.id}/resend`)).status).toBe(200);
    } finally {
      delete process.env.SMTP_URL;
      await smtp.close();
    }
  });

  it("without SMTP_URL nothing leaves the server, so an unproven account's e-mail invite is only logged, as before", async () => {
    const own = await h.user("Owner");
    const hub = await team(own);
    await h.db.user.update({ where: { id: own.id }, data: { emailUnverified: true } });
    const res = await own.post(`/v1/hubs/${hub.id}/invites`, { role: "viewer", email: "colleague@example.test" });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.delivery).toMatchObject({ transport: "outbox", status: "logged" });
  });
});

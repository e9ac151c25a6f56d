import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDatabase } from "@/lib/db/database.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Issue 18, finding 7: update-memory and delete-memory checked the caller's role in one statement and
// wrote in another. These tests put a concurrent change (the caller demoted or removed) exactly
// between the two, by running it right after the permission read returns.

let h: Harness;
let own: Client, con: Client;
let hubId: string;

/**
 * Runs `between` once, right after the `nth` call of `model.op` in the next request returns (the
 * permission check it tests). Returns how many such calls were seen.
 */
function interleaveAfter(model: "Memory" | "HubMember", op: "findFirst" | "findMany" | "findUnique", nth: number, between: () => Promise<unknown>) {
  let seen = 0;
  const db = h.database.prisma.$extends({
    query: {
      $allModels: {
        async $allOperations({ model: called, operation, args, query }) {
          const found = await query(args);
          if (called === model && operation === op && ++seen === nth) await between();
          return found;
        },
      },
    },
  });
  setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
  return () => seen;
}

/** Runs `between` once, right after the next memory lookup (the permission check) returns. */
const interleave = (between: () => Promise<unknown>) => interleaveAfter("Memory", "findFirst", 1, between);

beforeAll(async () => {
  h = await createHarness();
  own = await h.user("Owner");
  con = await h.user("Con");
});
afterAll(async () => {
  setDatabase(h.database);
  await h.close();
});

async function setup(policy: "own" | "any" = "own") {
  setDatabase(h.database);
  hubId = await h.teamHub(own, [[con, "contributor"]], { contributorDeletePolicy: policy });
  const res = await con.post("/v1/memories", { content: "# Mine\n\nwritten by the contributor" }, { headers: { "x-hub-id": hubId } });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
const demote = () => h.db.hubMember.update({ where: { hubId_userId: { hubId, userId: con.id } }, data: { role: "viewer" } });
const remove = () => h.db.hubMember.delete({ where: { hubId_userId: { hubId, userId: con.id } } });

describe("check-then-write races on one memory", () => {
  it("an edit whose author is demoted to viewer mid-request is refused, and the memory is unchanged", async () => {
    const id = await setup();
    interleave(demote);
    const res = await con.patch(`/v1/memories/${id}`, { title: "edited after demotion" });
    setDatabase(h.database);
    expect(res.status).toBe(403);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).title).toBe("Mine");
  });

  it("an edit whose author is removed from the hub mid-request is not found, and the memory is unchanged", async () => {
    const id = await setup();
    interleave(remove);
    const res = await con.patch(`/v1/memories/${id}`, { content: "# Replaced\n\nby a former member" });
    setDatabase(h.database);
    expect(res.status).toBe(404);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).content).toContain("written by the contributor");
  });

  it("a delete whose author is demoted mid-request is refused, and the memory stays", async () => {
    const id = await setup();
    interleave(demote);
    const res = await con.delete(`/v1/memories/${id}`);
    setDatabase(h.database);
    expect(res.status).toBe(403);
    expect(await h.db.memory.count({ where: { id } })).toBe(1);
  });

  it("a delete allowed by policy 'any' is refused when the policy turns 'none' mid-request", async () => {
    const id = await setup("any");
    const other = await own.post("/v1/memories", { content: "# Owner's\n\nnot the contributor's" }, { headers: { "x-hub-id": hubId } });
    interleave(() => h.db.hub.update({ where: { id: hubId }, data: { contributorDeletePolicy: "none" } }));
    const res = await con.delete(`/v1/memories/${other.body.data.id}`);
    setDatabase(h.database);
    expect(res.status).toBe(403);
    expect(await h.db.memory.count({ where: { id: other.body.data.id } })).toBe(1);
    expect(id).toBeTruthy();
  });

  it("a batch delete allowed by policy 'any' deletes nothing of others' once the policy turns 'none' mid-request", async () => {
    const mine = await setup("any");
    const other = (await own.post("/v1/memories", { content: "# Owner's\n\nnot the contributor's" }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    // Right after the batch reads the caller's memberships (its permission check), the policy changes.
    const seen = interleaveAfter("HubMember", "findMany", 1, () => h.db.hub.update({ where: { id: hubId }, data: { contributorDeletePolicy: "none" } }));
    const res = await con.post("/v1/memories/batch-delete", { ids: [other, mine] });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(200);
    expect(res.body.data.deleted).toBe(0);
    expect(res.body.data.skipped.map((s: { id: string }) => s.id).sort()).toEqual([mine, other].sort());
    expect(await h.db.memory.count({ where: { id: { in: [mine, other] } } })).toBe(2);
  });

  it("two concurrent edits of different fields both land (no lost update)", async () => {
    const id = await setup();
    setDatabase(h.database);
    const [a, b] = await Promise.all([
      con.patch(`/v1/memories/${id}`, { title: "New title" }),
      con.patch(`/v1/memories/${id}`, { tags: ["race"] }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const row = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect(row.title).toBe("New title");
    expect(row.tags).toEqual(["race"]);
  });
});

describe("check-then-write races on membership", () => {
  it("an admin's removal of a contributor promoted to admin mid-request removes nobody (409)", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const target = await h.user("Target");
    const hub = await h.teamHub(own, [[adm, "admin"], [target, "contributor"]]);
    // 1st lookup: the caller's own membership (the permission check); 2nd: the target's.
    const seen = interleaveAfter("HubMember", "findUnique", 2, () => h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId: target.id } }, data: { role: "admin" } }));
    const res = await adm.delete(`/v1/hubs/${hub}/members/${target.id}`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(2);
    expect(res.status).toBe(409);
    expect((await h.db.hubMember.findUnique({ where: { hubId_userId: { hubId: hub, userId: target.id } } }))?.role).toBe("admin");
  });

  it("an ownership offer to a member who leaves mid-request is refused, and no pending offer remains", async () => {
    setDatabase(h.database);
    const target = await h.user("Leaver");
    const hub = await h.teamHub(own, [[target, "admin"]]);
    const seen = interleaveAfter("HubMember", "findUnique", 2, () => target.post(`/v1/hubs/${hub}/leave`));
    const res = await own.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: target.id });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(2);
    expect(res.status).toBe(400);
    expect(await h.db.ownershipTransfer.count({ where: { hubId: hub, state: "pending" } })).toBe(0);
  });
});

describe("an administrator demoted or removed mid-request changes no one", () => {
  // The caller's own membership is the 1st lookup (the permission check): right after it, they lose the role.
  const demoteCaller = (hub: string, userId: string) => () => h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId } }, data: { role: "viewer" } });
  const removeCaller = (hub: string, userId: string) => () => h.db.hubMember.delete({ where: { hubId_userId: { hubId: hub, userId } } });

  it("a role change by an admin demoted to viewer mid-request is refused, and the role stays", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const target = await h.user("Target");
    const hub = await h.teamHub(own, [[adm, "admin"], [target, "viewer"]]);
    const seen = interleaveAfter("HubMember", "findUnique", 1, demoteCaller(hub, adm.id));
    const res = await adm.patch(`/v1/hubs/${hub}/members/${target.id}`, { role: "contributor" });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect((await h.db.hubMember.findUniqueOrThrow({ where: { hubId_userId: { hubId: hub, userId: target.id } } })).role).toBe("viewer");
  });

  it("an admin promotion by an owner who handed the hub over mid-request is refused", async () => {
    setDatabase(h.database);
    const boss = await h.user("Boss");
    const heir = await h.user("Heir");
    const target = await h.user("Target");
    const hub = await h.teamHub(boss, [[heir, "admin"], [target, "contributor"]]);
    const offer = await boss.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: heir.id });
    expect(offer.status).toBe(201);
    const seen = interleaveAfter("HubMember", "findUnique", 1, () => heir.post(`/v1/hubs/${hub}/ownership-transfer/${offer.body.data.id}/accept`));
    const res = await boss.patch(`/v1/hubs/${hub}/members/${target.id}`, { role: "admin" });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect((await h.db.hubMember.findUniqueOrThrow({ where: { hubId_userId: { hubId: hub, userId: heir.id } } })).role).toBe("owner");
    expect(res.status).toBe(403);
    expect((await h.db.hubMember.findUniqueOrThrow({ where: { hubId_userId: { hubId: hub, userId: target.id } } })).role).toBe("contributor");
  });

  it("a removal by an admin removed from the hub mid-request removes nobody", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const target = await h.user("Target");
    const hub = await h.teamHub(own, [[adm, "admin"], [target, "contributor"]]);
    const seen = interleaveAfter("HubMember", "findUnique", 1, removeCaller(hub, adm.id));
    const res = await adm.delete(`/v1/hubs/${hub}/members/${target.id}`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(404);
    expect(await h.db.hubMember.count({ where: { hubId: hub, userId: target.id } })).toBe(1);
  });

  it("an add by an admin demoted mid-request adds nobody", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const newcomer = await h.user("Newcomer");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    // The admin manages another hub the newcomer is in, so the add would find them.
    await h.teamHub(adm, [[newcomer, "viewer"]]);
    const seen = interleaveAfter("HubMember", "findUnique", 1, demoteCaller(hub, adm.id));
    const res = await adm.post(`/v1/hubs/${hub}/members`, { user_id: newcomer.id, role: "contributor" });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect(await h.db.hubMember.count({ where: { hubId: hub, userId: newcomer.id } })).toBe(0);
  });
});

describe("invites made or renewed by an admin demoted mid-request", () => {
  const demoteCaller = (hub: string, userId: string) => () => h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId } }, data: { role: "viewer" } });

  it("a regenerate by an admin demoted mid-request is refused: no new link, the old one still works", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const joiner = await h.user("Joiner");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    const invite = await own.post(`/v1/hubs/${hub}/invites`, { role: "contributor" });
    expect(invite.status).toBe(201);
    const seen = interleaveAfter("HubMember", "findUnique", 1, demoteCaller(hub, adm.id));
    const res = await adm.post(`/v1/hubs/${hub}/invites/${invite.body.data.id}/regenerate`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect(res.text).not.toContain("egi_");
    expect((await joiner.post(`/v1/invites/${invite.body.data.token}/accept`)).status).toBe(200);
  });

  it("an invite by an admin demoted mid-request is not created", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    const seen = interleaveAfter("HubMember", "findUnique", 1, demoteCaller(hub, adm.id));
    const res = await adm.post(`/v1/hubs/${hub}/invites`, { role: "viewer" });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect(await h.db.invite.count({ where: { hubId: hub } })).toBe(0);
  });

  it("a resend by an admin demoted mid-request is refused and mails nothing", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    const invite = await own.post(`/v1/hubs/${hub}/invites`, { role: "contributor", email: "resent@example.test" });
    expect(invite.status).toBe(201);
    // Past the once-a-minute throttle, so only the role decides.
    await h.db.invite.update({ where: { id: invite.body.data.id }, data: { lastSentAt: null } });
    const seen = interleaveAfter("HubMember", "findUnique", 1, demoteCaller(hub, adm.id));
    const res = await adm.post(`/v1/hubs/${hub}/invites/${invite.body.data.id}/resend`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect(await h.db.mailOutbox.count({ where: { senderId: adm.id } })).toBe(0);
  });

  it("a revoke by an admin removed mid-request is refused, and the link still works", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const joiner = await h.user("Joiner");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    const invite = await own.post(`/v1/hubs/${hub}/invites`, { role: "contributor" });
    expect(invite.status).toBe(201);
    const remove = () => h.db.hubMember.delete({ where: { hubId_userId: { hubId: hub, userId: adm.id } } });
    const seen = interleaveAfter("HubMember", "findUnique", 1, remove);
    const res = await adm.delete(`/v1/hubs/${hub}/invites/${invite.body.data.id}`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(404);
    expect((await joiner.post(`/v1/invites/${invite.body.data.token}/accept`)).status).toBe(200);
  });
});

describe("hub settings changed by an admin demoted mid-request", () => {
  it("a rename by an admin demoted to viewer mid-request is refused, and the hub keeps its name", async () => {
    setDatabase(h.database);
    const adm = await h.user("Adm");
    const hub = await h.teamHub(own, [[adm, "admin"]]);
    const before = await h.db.hub.findUniqueOrThrow({ where: { id: hub } });
    const seen = interleaveAfter("HubMember", "findUnique", 1, () => h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId: adm.id } }, data: { role: "viewer" } }));
    const res = await adm.patch(`/v1/hubs/${hub}`, { name: "Renamed by a viewer", contributor_delete_policy: "any" });
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    const after = await h.db.hub.findUniqueOrThrow({ where: { id: hub } });
    expect([after.name, after.contributorDeletePolicy]).toEqual([before.name, before.contributorDeletePolicy]);
  });
});

describe("canceling an ownership transfer while the hub changes", () => {
  it("an owner who hands the hub over mid-request, then cancels an offer to someone else, is refused (403) and the offer stays pending", async () => {
    setDatabase(h.database);
    const boss = await h.user("Boss");
    const heir = await h.user("Heir");
    const next = await h.user("Next");
    const hub = await h.teamHub(boss, [[heir, "admin"], [next, "admin"]]);
    const offer = await boss.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: heir.id });
    expect(offer.status).toBe(201);
    // The hand-over as an accept leaves it: the former owner an admin, the new one owner.
    const handOver = () =>
      h.db.$transaction([
        h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId: boss.id } }, data: { role: "admin" } }),
        h.db.hubMember.update({ where: { hubId_userId: { hubId: hub, userId: next.id } }, data: { role: "owner" } }),
        h.db.hub.update({ where: { id: hub }, data: { ownerId: next.id } }),
      ]);
    const seen = interleaveAfter("HubMember", "findUnique", 1, handOver);
    const res = await boss.post(`/v1/hubs/${hub}/ownership-transfer/${offer.body.data.id}/cancel`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("forbidden");
    expect((await h.db.ownershipTransfer.findUniqueOrThrow({ where: { id: offer.body.data.id } })).state).toBe("pending");
    expect(await h.db.event.count({ where: { hubId: hub, type: "transfer.canceled" } })).toBe(0);
  });

  it("a cancel by the target removed (and so declined) mid-request is 404 (not_found), not a 410 about a hub they no longer belong to", async () => {
    setDatabase(h.database);
    const boss = await h.user("Boss");
    const heir = await h.user("Heir");
    const hub = await h.teamHub(boss, [[heir, "admin"]]);
    const offer = await boss.post(`/v1/hubs/${hub}/ownership-transfer`, { target_user_id: heir.id });
    expect(offer.status).toBe(201);
    const seen = interleaveAfter("HubMember", "findUnique", 1, () => boss.delete(`/v1/hubs/${hub}/members/${heir.id}`));
    const res = await heir.post(`/v1/hubs/${hub}/ownership-transfer/${offer.body.data.id}/cancel`);
    setDatabase(h.database);
    expect(seen()).toBeGreaterThanOrEqual(1);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});

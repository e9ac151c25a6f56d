import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { quotaLimits, DEFAULT_QUOTAS } from "@/lib/quotas/quota-limits.ts";
import { storageUsage } from "@/lib/quotas/storage-usage.ts";
import pg from "pg";
import { setDatabase } from "@/lib/db/database.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

// Issue 18: storage quotas per user and per hub (bytes and memories), env-configurable.

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterEach(() => {
  for (const key of ["ENGRAM_QUOTA_USER_BYTES", "ENGRAM_QUOTA_USER_MEMORIES", "ENGRAM_QUOTA_HUB_BYTES", "ENGRAM_QUOTA_HUB_MEMORIES"]) delete process.env[key];
});
afterAll(async () => {
  await h.close();
});

let n = 0;
const push = (user: Client, content: string, hubId?: string) =>
  user.post("/v1/memories", { content: `${content} #${++n}` }, hubId ? { headers: { "x-hub-id": hubId } } : {});
const bytes = (size: number) => "x".repeat(size);

describe("storage quotas", () => {
  it("reads limits from the environment, with binary suffixes and 0 for unlimited", () => {
    expect(quotaLimits({})).toEqual(DEFAULT_QUOTAS);
    expect(quotaLimits({ ENGRAM_QUOTA_USER_BYTES: "512MiB", ENGRAM_QUOTA_HUB_BYTES: "2G", ENGRAM_QUOTA_USER_MEMORIES: "0" })).toMatchObject({
      user: { bytes: 512 * 1024 ** 2, memories: null },
      hub: { bytes: 2 * 1024 ** 3 },
    });
    expect(() => quotaLimits({ ENGRAM_QUOTA_HUB_MEMORIES: "lots" })).toThrow(/ENGRAM_QUOTA_HUB_MEMORIES/);
  });

  it("a setting that is no size stops start-up, naming it, instead of a server whose every push and /v1/usage is a 500", () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "engram-quota-start-"));
    try {
      const script = 'const { startServer } = await import(process.cwd() + "/lib/system/start-server.ts"); await startServer(); console.log("started");';
      const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: path.resolve(import.meta.dirname, ".."),
        env: { ...process.env, ENGRAM_DATA_DIR: dataDir, DATABASE_URL: "", ENGRAM_QUOTA_USER_BYTES: "1.5G" },
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(run.stdout).not.toMatch(/started|database ready/);
      expect(run.status).not.toBe(0);
      expect(run.stderr).toMatch(/ENGRAM_QUOTA_USER_BYTES: "1\.5G" is not a size/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 130_000);

  it("refuses the push past a user's memory quota with 413 quota_exceeded; deleting frees room", async () => {
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "3";
    const ann = await h.user("Ann");
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await push(ann, "# Note")).body.data.id);
    const refused = await push(ann, "# One too many");
    expect(refused.status).toBe(413);
    expect(refused.body.error).toMatchObject({ code: "quota_exceeded", details: { scope: "user", resource: "memories", limit: 3, used: 3 } });
    expect(await h.db.memory.count({ where: { ownerId: ann.id } })).toBe(3);
    // The refusal is read in the statement that records the event: it goes with the memory.
    expect(await h.db.event.count({ where: { actorId: ann.id, type: "memory.created" } })).toBe(3);
    expect((await ann.delete(`/v1/memories/${ids[0]}`)).status).toBe(200);
    expect((await push(ann, "# Room again")).status).toBe(201);
  });

  it("counts content bytes per user across hubs, on push and on edits that grow content", async () => {
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const bob = await h.user("Bob");
    const first = await push(bob, bytes(600));
    expect(first.status).toBe(201);
    const team = await h.teamHub(bob);
    const before = await storageUsage(h.db, "user", bob.id);
    const refused = await push(bob, bytes(600), team);
    expect(refused.status).toBe(413);
    // `used` is what was used before the refused write, which is rolled back with its counters.
    expect(refused.body.error.details).toMatchObject({ scope: "user", resource: "bytes", limit: 1000, used: before.bytes, requested: 600 + ` #${n}`.length });
    expect(await storageUsage(h.db, "user", bob.id)).toEqual(before);
    expect(await storageUsage(h.db, "hub", team)).toEqual({ bytes: 0, memories: 0 });
    const grow = await bob.patch(`/v1/memories/${first.body.data.id}`, { content: bytes(1200) });
    expect([grow.status, grow.body.error?.code]).toEqual([413, "quota_exceeded"]);
    expect(grow.body.error.details).toMatchObject({ used: before.bytes, requested: 1200 - before.bytes });
    expect(await storageUsage(h.db, "user", bob.id)).toEqual(before);
    expect((await bob.get(`/v1/memories/${first.body.data.id}`)).body.data.content).toBe(`${bytes(600)} #${n - 1}`);
    // Shrinking is always allowed, and frees room.
    expect((await bob.patch(`/v1/memories/${first.body.data.id}`, { content: bytes(100) })).status).toBe(200);
    expect((await push(bob, bytes(600), team)).status).toBe(201);
    expect(await storageUsage(h.db, "user", bob.id)).toEqual({ bytes: expect.any(Number), memories: 2 });
  });

  it("limits a hub whatever its members' own quotas", async () => {
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = "2";
    const own = await h.user("Owner");
    const con = await h.user("Con");
    const team = await h.teamHub(own, [[con, "contributor"]]);
    expect((await push(own, "# a", team)).status).toBe(201);
    expect((await push(con, "# b", team)).status).toBe(201);
    const refused = await push(con, "# c", team);
    expect(refused.status).toBe(413);
    expect(refused.body.error.details).toMatchObject({ scope: "hub", resource: "memories", limit: 2 });
    // Their personal hubs are other hubs.
    expect((await push(con, "# personal")).status).toBe(201);
  });

  it("holds for memories moved into a hub as for memories pushed: a batch move past it moves nothing (413)", async () => {
    const own = await h.user("Owner");
    const team = await h.teamHub(own, []);
    expect((await push(own, "# in the team", team)).status).toBe(201);
    const mine = [];
    for (const name of ["a", "b", "c"]) mine.push((await push(own, `# personal ${name}`)).body.data.id as string);
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = "2";
    const refused = await own.post("/v1/memories/batch-move", { ids: mine, hub_id: team });
    expect(refused.status).toBe(413);
    expect(refused.body.error.details).toMatchObject({ scope: "hub", resource: "memories", limit: 2 });
    expect(await h.db.memory.count({ where: { hubId: team } })).toBe(1);
    expect(await h.db.memory.count({ where: { id: { in: mine }, hubId: own.personalHubId } })).toBe(3);
    const one = await own.post("/v1/memories/batch-move", { ids: [mine[0]], hub_id: team });
    expect(one.status, JSON.stringify(one.body)).toBe(200);
    expect(one.body.data.moved).toBe(1);
    expect((await storageUsage(h.db, "hub", team)).memories).toBe(2);
  });

  it("reports used and requested on a batch move refused on the hub's bytes, like other quota errors", async () => {
    const own = await h.user("Mover");
    const team = await h.teamHub(own, []);
    expect((await push(own, bytes(300), team)).status).toBe(201);
    const mine = [];
    for (const name of ["a", "b"]) mine.push((await push(own, `${bytes(400)} ${name}`)).body.data.id as string);
    const before = await storageUsage(h.db, "hub", team);
    const movedBytes = (await h.db.memory.findMany({ where: { id: { in: mine } }, select: { content: true } })).reduce(
      (sum, m) => sum + Buffer.byteLength(m.content),
      0,
    );
    process.env.ENGRAM_QUOTA_HUB_BYTES = "1000";
    const refused = await own.post("/v1/memories/batch-move", { ids: mine, hub_id: team });
    expect(refused.status).toBe(413);
    expect(refused.body.error).toMatchObject({
      code: "quota_exceeded",
      details: { scope: "hub", resource: "bytes", limit: 1000, used: before.bytes, requested: movedBytes },
    });
    expect(await storageUsage(h.db, "hub", team)).toEqual(before);
  });

  it("holds under concurrent pushes: never more than the quota", async () => {
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "3";
    const cat = await h.user("Cat");
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => push(cat, `# Parallel ${i}`)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    expect(results.filter((r) => r.status === 413)).toHaveLength(3);
    expect(await h.db.memory.count({ where: { ownerId: cat.id } })).toBe(3);
  });

  it("keeps the counters exact through pushes, edits, moves and deletes, and reports them for /v1/usage", async () => {
    process.env.ENGRAM_QUOTA_HUB_BYTES = "1MiB";
    const dan = await h.user("Dan");
    const team = await h.teamHub(dan);
    const a = (await push(dan, "# A\n\nalpha")).body.data;
    const b = (await push(dan, "# B\n\nbeta beta", team)).body.data;
    await dan.patch(`/v1/memories/${a.id}`, { content: "# A\n\nalpha, longer now" });
    expect((await dan.post("/v1/memories/batch-move", { ids: [a.id], hub_id: team })).status).toBe(200);
    const rows = await h.db.memory.findMany({ where: { ownerId: dan.id } });
    const total = rows.reduce((sum, m) => sum + Buffer.byteLength(m.content, "utf8"), 0);
    expect(await storageUsage(h.db, "user", dan.id)).toEqual({ memories: 2, bytes: total });
    expect(await storageUsage(h.db, "hub", team)).toEqual({ memories: 2, bytes: total });
    expect(await storageUsage(h.db, "hub", dan.personalHubId)).toEqual({ memories: 0, bytes: 0 });
    expect((await dan.get("/v1/usage")).body.data).toMatchObject({ memory_count: 2, storage_bytes: total });
    expect(quotaLimits()).toMatchObject({ user: { memories: 100_000 }, hub: { bytes: 1024 ** 2, memories: 500_000 } });
    await dan.delete(`/v1/memories/${b.id}`);
    expect((await storageUsage(h.db, "hub", team)).memories).toBe(1);
  });
});

describe("storage quotas and a hub marked deleted", () => {
  it("no longer counts its memories for their owners, while the sweep still purges them: a push is let in, /v1/usage leaves them out", async () => {
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "3";
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const eve = await h.user("Eve");
    const team = await h.teamHub(eve);
    for (let i = 0; i < 3; i++) expect((await push(eve, `# Team note\n\n${bytes(250)}`, team)).status).toBe(201);
    expect((await push(eve, "# Full")).status).toBe(413);
    // Deleted to make room, the memories not purged yet (a large hub's rest waits for the sweep, up to 10 minutes).
    await h.db.hub.update({ where: { id: team }, data: { deletedAt: new Date() } });
    await h.db.hubMember.deleteMany({ where: { hubId: team } });
    expect(await h.db.memory.count({ where: { hubId: team } })).toBe(3);
    const usage = (await eve.get("/v1/usage")).body.data;
    expect([usage.memory_count, usage.storage_bytes]).toEqual([0, 0]);
    const kept = await push(eve, `# Kept\n\n${bytes(600)}`);
    expect(kept.status, JSON.stringify(kept.body)).toBe(201);
    // Let in only once the deleted hub was discounted, after its statement recorded no event: recorded then.
    expect(await h.db.event.count({ where: { type: "memory.created", entityId: kept.body.data.id } })).toBe(1);
    // What counts is what stays: the quota still holds for the rest.
    const refused = await push(eve, `# Too big\n\n${bytes(600)}`);
    expect(refused.status).toBe(413);
    const keptBytes = Buffer.byteLength((await h.db.memory.findUniqueOrThrow({ where: { id: kept.body.data.id } })).content, "utf8");
    expect(refused.body.error.details).toMatchObject({ scope: "user", resource: "bytes", used: keptBytes });
  });
});

describe("storage quotas and hub membership", () => {
  const join = async (owner: Client, hubId: string, member: Client) => {
    const invite = await owner.post(`/v1/hubs/${hubId}/invites`, { role: "contributor" });
    const accepted = await member.post(`/v1/invites/${invite.body.data.token}/accept`);
    expect(accepted.status, accepted.text).toBe(200);
  };
  const usage = async (user: Client) => {
    const data = (await user.get("/v1/usage")).body.data;
    return { memories: data.memory_count, bytes: data.storage_bytes };
  };
  /** What `user` owns in the hubs they are a member of, counted from the rows. */
  const ownedWhereMember = async (user: Client) => {
    const rows = await h.db.memory.findMany({ where: { ownerId: user.id, hub: { members: { some: { userId: user.id } } } } });
    return { memories: rows.length, bytes: rows.reduce((sum, m) => sum + Buffer.byteLength(m.content, "utf8") + Number(m.attachmentBytes), 0) };
  };

  it("what a member wrote in a hub they left or were removed from no longer counts against their quota; rejoining counts it again", async () => {
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "3";
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const ola = await h.user("Ola");
    const max = await h.user("Max");
    const team = await h.teamHub(ola);
    await join(ola, team, max);
    const written = [];
    for (let i = 0; i < 3; i++) {
      const res = await push(max, `# Team note\n\n${bytes(250)}`, team);
      expect(res.status).toBe(201);
      written.push(res.body.data.id as string);
    }
    expect((await push(max, "# Full")).status).toBe(413);
    const teamBefore = await storageUsage(h.db, "hub", team);

    expect((await max.post(`/v1/hubs/${team}/leave`)).status).toBe(200);
    // Out of their hands: out of their quota and /v1/usage. Still theirs by name, and still the hub's.
    expect(await usage(max)).toEqual({ memories: 0, bytes: 0 });
    expect(await storageUsage(h.db, "user", max.id)).toEqual({ memories: 0, bytes: 0 });
    expect(await h.db.memory.count({ where: { id: { in: written }, ownerId: max.id } })).toBe(3);
    expect(await storageUsage(h.db, "hub", team)).toEqual(teamBefore);
    const mine = await push(max, "# Mine");
    expect(mine.status, mine.text).toBe(201);
    // An admin growing it meanwhile grows the hub's count, not the former member's, and is not held to their quota.
    const grown = await ola.patch(`/v1/memories/${written[0]}`, { content: `# Team note, grown\n\n${bytes(400)}` });
    expect(grown.status, grown.text).toBe(200);
    expect(await storageUsage(h.db, "user", max.id)).toEqual(await ownedWhereMember(max));

    // Rejoining counts it again, even past the quota (joining is not refused for it); pushes then are.
    await join(ola, team, max);
    expect(await storageUsage(h.db, "user", max.id)).toEqual(await ownedWhereMember(max));
    expect(await usage(max)).toEqual(await ownedWhereMember(max));
    expect((await usage(max)).memories).toBe(4);
    const refused = await push(max, "# Over");
    expect(refused.status).toBe(413);
    expect(refused.body.error.details).toMatchObject({ scope: "user", resource: "memories", used: 4 });

    // Removal takes it off as leaving does.
    expect((await ola.delete(`/v1/hubs/${team}/members/${max.id}`)).status).toBe(200);
    expect(await usage(max)).toEqual(await ownedWhereMember(max));
    expect((await usage(max)).memories).toBe(1);
    expect(await storageUsage(h.db, "hub", team)).toMatchObject({ memories: 3 });
  });

  it("an edit growing a former member's memory is held to the hub's quota, not to theirs", async () => {
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const rae = await h.user("Rae");
    const sam = await h.user("Sam");
    const kept = await h.teamHub(rae);
    const left = await h.teamHub(rae);
    await join(rae, kept, sam);
    expect((await push(sam, `# Kept\n\n${bytes(400)}`, kept)).status).toBe(201);
    expect((await sam.post(`/v1/hubs/${kept}/leave`)).status).toBe(200);
    await join(rae, left, sam);
    const theirs = (await push(sam, "# Left behind", left)).body.data.id as string;
    expect((await sam.post(`/v1/hubs/${left}/leave`)).status).toBe(200);
    expect((await push(sam, `# Own\n\n${bytes(900)}`)).status).toBe(201);
    // Back in the first hub: past the quota (a join is not refused for it).
    await join(rae, kept, sam);
    expect((await usage(sam)).bytes).toBeGreaterThan(1000);
    const grown = await rae.patch(`/v1/memories/${theirs}`, { content: `# Left behind, grown\n\n${bytes(300)}` });
    expect(grown.status, grown.text).toBe(200);
    expect(await storageUsage(h.db, "user", sam.id)).toEqual(await ownedWhereMember(sam));
  });

  it("a batch move bringing a former member's memory into a hub they are in is held to their quota (413, nothing moved); within it, counted exactly", async () => {
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const tia = await h.user("Tia");
    const uma = await h.user("Uma");
    const from = await h.teamHub(tia);
    const to = await h.teamHub(tia);
    await join(tia, from, uma);
    await join(tia, to, uma);
    const theirs = (await push(uma, `# Written before leaving\n\n${bytes(500)}`, from)).body.data.id as string;
    expect((await uma.post(`/v1/hubs/${from}/leave`)).status).toBe(200);
    expect((await push(uma, `# Own\n\n${bytes(600)}`)).status).toBe(201);
    const before = await storageUsage(h.db, "user", uma.id);
    const refused = await tia.post("/v1/memories/batch-move", { ids: [theirs], hub_id: to });
    expect(refused.status, refused.text).toBe(413);
    // The mover learns whose quota and what the move adds, not the owner's totals (their personal hub and
    // hubs the mover is not in included): only what a push of the owner's own would tell the owner.
    const movedBytes = Buffer.byteLength((await h.db.memory.findUniqueOrThrow({ where: { id: theirs } })).content, "utf8");
    expect(refused.body.error).toMatchObject({ code: "quota_exceeded" });
    expect(refused.body.error.details).toEqual({ scope: "user", resource: "bytes", owner_id: uma.id, limit: 1000, requested: movedBytes });
    expect(refused.body.error.message).not.toContain(String(before.bytes));
    expect(refused.body.error.message).not.toContain(String(before.bytes + movedBytes));
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: theirs } })).hubId).toBe(from);
    expect(await storageUsage(h.db, "user", uma.id)).toEqual(before);
    process.env.ENGRAM_QUOTA_USER_BYTES = "2000";
    const moved = await tia.post("/v1/memories/batch-move", { ids: [theirs], hub_id: to });
    expect(moved.status, moved.text).toBe(200);
    expect(await storageUsage(h.db, "user", uma.id)).toEqual(await ownedWhereMember(uma));
    expect((await storageUsage(h.db, "user", uma.id)).memories).toBe(2);
  });

  it("a deleted hub's share leaves its members' counters at the delete, and its purge takes nothing more off them", async () => {
    const pia = await h.user("Pia");
    const quinn = await h.user("Quinn");
    const team = await h.teamHub(pia);
    await join(pia, team, quinn);
    const other = await h.teamHub(pia);
    expect((await push(quinn, "# Before", team)).status).toBe(201);
    // Quinn left before the delete: the share is off already, and must not come off again with the purge.
    expect((await quinn.post(`/v1/hubs/${team}/leave`)).status).toBe(200);
    expect((await push(pia, "# Pia's", team)).status).toBe(201);
    expect((await push(pia, "# Pia's elsewhere", other)).status).toBe(201);
    expect((await push(quinn, "# Quinn's own")).status).toBe(201);
    expect((await pia.delete(`/v1/hubs/${team}`)).status).toBe(200);
    expect(await h.db.memory.count({ where: { hubId: team } })).toBe(0);
    // Purged to the end, the hub leaves no counter behind (they piled up, one set per hub ever deleted).
    expect(await h.db.hub.count({ where: { id: team } })).toBe(0);
    expect(await h.db.storageUsage.count({ where: { scopeId: team } })).toBe(0);
    expect(await h.db.hubOwnerUsage.count({ where: { hubId: team } })).toBe(0);
    for (const user of [pia, quinn]) {
      expect(await storageUsage(h.db, "user", user.id)).toEqual(await ownedWhereMember(user));
      expect(await usage(user)).toEqual(await ownedWhereMember(user));
      expect((await usage(user)).memories).toBe(1);
    }
  });
});

describe("storage quotas on re-pushed links", () => {
  afterEach(() => {
    delete process.env.ENGRAM_QUOTA_USER_BYTES;
  });

  it("holds a link pushed again under its source_path to the quota: a longer URL is growth like any other", async () => {
    process.env.ENGRAM_QUOTA_USER_BYTES = "1000";
    const eve = await h.user("Eve");
    const first = await eve.post("/v1/memories", { content: "https://example.invalid/a", content_type: "link", source_path: "links/a" });
    expect(first.status).toBe(201);
    const before = await storageUsage(h.db, "user", eve.id);
    const long = `https://example.invalid/${"a".repeat(5000)}`;
    const again = await eve.post("/v1/memories", { content: long, content_type: "link", source_path: "links/a" });
    expect([again.status, again.body.error?.code]).toEqual([413, "quota_exceeded"]);
    expect(again.body.error.details).toMatchObject({ scope: "user", resource: "bytes", limit: 1000 });
    expect(await storageUsage(h.db, "user", eve.id)).toEqual(before);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: first.body.data.id } })).content).toBe("https://example.invalid/a");
  });
});

describe("a push refused for a quota and the server's events lock", () => {
  // The push's quota read runs in its event's statement, whose first step took the server-wide events
  // lock: a refused push then held it through its refusal's reads and until its rollback, holding up
  // every write that records an event, in every hub.
  it.skipIf(!testPostgres())("does not hold it while its refusal is worked out", async () => {
    const ann = await h.user("Ann");
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "1";
    expect((await push(ann, "the one allowed")).status).toBe(201);
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const free: boolean[] = [];
    const db = h.database.prisma.$extends({
      query: {
        async $allOperations({ operation, args, query }) {
          const result = await query(args);
          // After the statement that read the quota (and would have recorded the event), before the rollback.
          if (operation === "$queryRaw" && JSON.stringify(args).includes("was_read")) {
            await side.query("BEGIN");
            free.push((await side.query("SELECT pg_try_advisory_xact_lock($1::bigint) AS ok", [0x656e6772])).rows[0].ok);
            await side.query("ROLLBACK");
          }
          return result;
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    try {
      const refused = await push(ann, "one too many");
      expect(refused.status).toBe(413);
      expect(refused.body.error.code).toBe("quota_exceeded");
    } finally {
      setDatabase(h.database);
      await side.end();
    }
    expect(free).toEqual([true]);
    // Within the quota, the event is still recorded with the memory.
    process.env.ENGRAM_QUOTA_USER_MEMORIES = "2";
    const stored = await push(ann, "now there is room");
    expect(stored.status).toBe(201);
    expect(await h.db.event.count({ where: { type: "memory.created", entityId: stored.body.data.id } })).toBe(1);
  });
});

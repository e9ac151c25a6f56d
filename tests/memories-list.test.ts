import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;
let bob: Client;
let team: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  team = await h.teamHub(bob, [[ann, "viewer"]]);
  for (let i = 0; i < 7; i++) await ann.post("/v1/memories", { content: `ann personal ${i}` });
  for (let i = 0; i < 3; i++) await bob.post("/v1/memories", { content: `team memory ${i}` }, { headers: { "x-hub-id": team } });
  await bob.post("/v1/memories", { content: "bob private" });
});
afterAll(() => h.close());

const ids = (res: { body: { data: { memories: { id: string }[] } } }) => res.body.data.memories.map((m) => m.id);

describe("GET /v1/memories", () => {
  test("lists every readable hub newest first, without content, with total", async () => {
    const res = await ann.get("/v1/memories");
    expect(res.status).toBe(200);
    const { memories, total, has_more, next_cursor } = res.body.data;
    expect(total).toBe(10);
    expect(memories).toHaveLength(10);
    expect(has_more).toBe(false);
    expect(next_cursor).toBe("");
    expect(memories[0].content).toBeUndefined();
    expect(res.text).not.toContain("bob private");
    const times = memories.map((m: { created_at: string }) => m.created_at);
    expect([...times].sort().reverse()).toEqual(times);
  });

  test("a filtered list counts its total on the first page only and carries it in the cursor; an unfiltered one reads its counters each page", async () => {
    const cal = await h.user("Counter");
    for (let i = 0; i < 3; i++) expect((await cal.post("/v1/memories", { content: `Counted note ${i}.`, kind: "procedural" })).status).toBe(201);
    const first = await cal.get("/v1/memories?kind=procedural&limit=2");
    expect(first.body.data).toMatchObject({ total: 3, has_more: true });
    const plain = await cal.get("/v1/memories?limit=2");
    expect(plain.body.data.total).toBe(3);
    // Added after the first page: a recount would see 4 (and read every matching row again to say so).
    expect((await cal.post("/v1/memories", { content: "One more counted note.", kind: "procedural" })).status).toBe(201);
    const second = await cal.get(`/v1/memories?kind=procedural&limit=2&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(second.body.data.total).toBe(3);
    const plainSecond = await cal.get(`/v1/memories?limit=2&cursor=${encodeURIComponent(plain.body.data.next_cursor)}`);
    expect(plainSecond.body.data.total).toBe(4);
  });

  test("hub_id narrows; a foreign hub is 404 and a slug is 400", async () => {
    const res = await ann.get(`/v1/memories?hub_id=${team}`);
    expect(res.body.data.total).toBe(3);
    expect(res.body.data.memories.every((m: { hub_id: string }) => m.hub_id === team)).toBe(true);
    expect((await ann.get(`/v1/memories?hub_id=${bob.personalHubId}`)).status).toBe(404);
    const slug = await ann.get(`/v1/memories?hub_id=my-team`);
    expect(slug.status).toBe(400);
    expect(slug.body.error.code).toBe("invalid_request");
  });

  test("pages with a cursor and ends with an empty next_cursor", async () => {
    const seen: string[] = [];
    let cursor = "";
    let pages = 0;
    do {
      const res = await ann.get(`/v1/memories?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      expect(res.status).toBe(200);
      seen.push(...ids(res));
      cursor = res.body.data.next_cursor;
      expect(res.body.data.has_more).toBe(cursor !== "");
      pages += 1;
    } while (cursor);
    expect(pages).toBe(4);
    expect(new Set(seen).size).toBe(10);
  });

  test("limit: default 20, clamped to 100, invalid values are invalid_limit", async () => {
    for (let i = 0; i < 15; i++) await ann.post("/v1/memories", { content: `filler ${i}` });
    expect((await ann.get("/v1/memories")).body.data.memories).toHaveLength(20);
    expect((await ann.get("/v1/memories?limit=1000")).body.data.memories).toHaveLength(25);
    for (const bad of ["0", "-1", "abc", "2.5"]) {
      const res = await ann.get(`/v1/memories?limit=${bad}`);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe("invalid_limit");
    }
  });

  test("tampered, foreign and other-sort cursors are invalid_cursor", async () => {
    const first = await ann.get("/v1/memories?limit=2");
    const cursor: string = first.body.data.next_cursor;
    const [payload, sig] = cursor.split(".");
    const decoded = JSON.parse(Buffer.from(payload!, "base64url").toString());
    decoded.p[0] = "2099-01-01T00:00:00.000Z";
    const forged = `${Buffer.from(JSON.stringify(decoded)).toString("base64url")}.${sig}`;
    for (const bad of [forged, "garbage", `${cursor}x`, cursor.replace(".", "")]) {
      const res = await ann.get(`/v1/memories?cursor=${encodeURIComponent(bad)}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("invalid_cursor");
    }
    expect((await bob.get(`/v1/memories?cursor=${encodeURIComponent(cursor)}`)).body.error.code).toBe("invalid_cursor");
    expect((await ann.get(`/v1/memories?sort=relevant&cursor=${encodeURIComponent(cursor)}`)).body.error.code).toBe("invalid_cursor");
    const keys = await ann.post("/v1/auth/api-keys", { name: "k" });
    expect(keys.status).toBe(201);
    await ann.post("/v1/auth/api-keys", { name: "k2" });
    const keyCursor = (await ann.get("/v1/auth/api-keys?limit=1")).body.data.next_cursor;
    expect((await ann.get(`/v1/memories?cursor=${encodeURIComponent(keyCursor)}`)).body.error.code).toBe("invalid_cursor");
  });

  test("a cursor of one hub's or filter's list is invalid_cursor on another's, not a silent skip", async () => {
    const mine = await ann.get(`/v1/memories?hub_id=${ann.personalHubId}&limit=2`);
    const cursor = encodeURIComponent(mine.body.data.next_cursor as string);
    // Same list, same filters, by hub_id or by X-Hub-ID: the cursor goes on.
    expect((await ann.get(`/v1/memories?hub_id=${ann.personalHubId}&limit=2&cursor=${cursor}`)).status).toBe(200);
    expect((await ann.get(`/v1/memories?limit=2&cursor=${cursor}`, { headers: { "x-hub-id": ann.personalHubId } })).status).toBe(200);
    // The team hub's newer memories would have been skipped from the personal hub's position on.
    for (const other of [`hub_id=${team}`, "", "kind=semantic", `actor=${ann.id}`, "created_after=2000-01-01T00:00:00Z"]) {
      const res = await ann.get(`/v1/memories?${other}&limit=2&cursor=${cursor}`);
      expect(res.status, other).toBe(400);
      expect(res.body.error.code).toBe("invalid_cursor");
    }
  });

  test("sort=relevant orders by access_count, then newest", async () => {
    const all = ids(await ann.get(`/v1/memories?hub_id=${team}`));
    const [newest, middle, oldest] = all as [string, string, string];
    await ann.get(`/v1/memories/${oldest}`);
    await ann.get(`/v1/memories/${oldest}`);
    await ann.get(`/v1/memories/${middle}`);
    const res = await ann.get(`/v1/memories?hub_id=${team}&sort=relevant`);
    expect(ids(res)).toEqual([oldest, middle, newest]);
    const paged = await ann.get(`/v1/memories?hub_id=${team}&sort=relevant&limit=2`);
    const rest = await ann.get(`/v1/memories?hub_id=${team}&sort=relevant&limit=2&cursor=${encodeURIComponent(paged.body.data.next_cursor)}`);
    expect([...ids(paged), ...ids(rest)]).toEqual([oldest, middle, newest]);
    expect((await ann.get("/v1/memories?sort=oldest")).status).toBe(400);
  });

  test("topic_id filters", async () => {
    const topic = await h.db.topic.create({ data: { id: crypto.randomUUID(), hubId: team, name: "Ops" } });
    const [first] = ids(await ann.get(`/v1/memories?hub_id=${team}`));
    await h.db.memory.update({ where: { id: first }, data: { topicId: topic.id } });
    expect(ids(await ann.get(`/v1/memories?topic_id=${topic.id}`))).toEqual([first]);
    // A topic that does not exist finds nothing; a malformed id is refused, as a malformed actor is (and
    // topic_id in recall and search): an empty 200 hid a client's typo behind "no memories here".
    expect((await ann.get(`/v1/memories?topic_id=${crypto.randomUUID()}`)).body.data.memories).toEqual([]);
    const malformed = await ann.get(`/v1/memories?topic_id=unknown`);
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ code: "invalid_request", details: { issues: [{ path: "topic_id" }] } });
    expect((await ann.get(`/v1/memories?actor=unknown`)).status).toBe(400);
  });

  test("walking pages while others insert: no duplicates, no gaps", async () => {
    const walker = await h.user("Walker");
    const hub = await h.teamHub(walker);
    const push = (content: string) => walker.post("/v1/memories", { content }, { headers: { "x-hub-id": hub } });
    for (let i = 0; i < 40; i++) await push(`initial ${i}`);
    const initial = new Set(ids(await walker.get(`/v1/memories?hub_id=${hub}&limit=100`)));
    expect(initial.size).toBe(40);
    const seen: string[] = [];
    let cursor = "";
    let n = 0;
    do {
      const [res] = await Promise.all([
        walker.get(`/v1/memories?hub_id=${hub}&limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`),
        push(`concurrent ${n++}`),
        push(`concurrent ${n++}`),
      ]);
      seen.push(...ids(res));
      cursor = res.body.data.next_cursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of initial) expect(seen).toContain(id);
  });

  test("across several hubs: both sorts page in the order one SQL statement gives, ties included", async () => {
    const merger = await h.user("Merger");
    const hubs = [merger.personalHubId, await h.teamHub(merger), await h.teamHub(merger)];
    const made: string[] = [];
    for (let i = 0; i < 18; i++) {
      const res = await merger.post("/v1/memories", { content: `merge note ${i}` }, { headers: { "x-hub-id": hubs[i % 3]! } });
      made.push(res.body.data.id);
    }
    // Ties on created_at across hubs (then id decides) and on access_count (then created_at decides).
    const tie = new Date("2026-01-01T00:00:00.000Z");
    await h.db.memory.updateMany({ where: { id: { in: made.slice(0, 9) } }, data: { createdAt: tie } });
    for (const [i, id] of made.entries()) await h.db.memory.update({ where: { id }, data: { accessCount: i % 4 } });
    for (const sort of ["newest", "relevant"] as const) {
      const expected = (
        await h.db.memory.findMany({
          where: { hubId: { in: hubs } },
          orderBy: sort === "relevant" ? [{ accessCount: "desc" }, { createdAt: "desc" }, { id: "desc" }] : [{ createdAt: "desc" }, { id: "desc" }],
          select: { id: true },
        })
      ).map((m) => m.id);
      expect(expected).toHaveLength(18);
      const seen: string[] = [];
      let cursor = "";
      do {
        const res = await merger.get(`/v1/memories?sort=${sort}&limit=4${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
        expect(res.status).toBe(200);
        expect(res.body.data.total).toBe(18);
        seen.push(...ids(res));
        cursor = res.body.data.next_cursor;
      } while (cursor);
      expect(seen, sort).toEqual(expected);
    }
    // The filters and the cursor hold in each hub's walk as in the one statement.
    await h.db.memory.updateMany({ where: { id: { in: made.filter((_, i) => i % 2 === 0) } }, data: { kind: "procedural" } });
    const filtered = { hubId: { in: hubs }, kind: "procedural", ownerId: merger.id, createdAt: { gt: new Date("2025-12-31T00:00:00.000Z"), lt: new Date("2099-01-01T00:00:00.000Z") } };
    for (const sort of ["newest", "relevant"] as const) {
      const expected = (
        await h.db.memory.findMany({
          where: filtered,
          orderBy: sort === "relevant" ? [{ accessCount: "desc" }, { createdAt: "desc" }, { id: "desc" }] : [{ createdAt: "desc" }, { id: "desc" }],
          select: { id: true },
        })
      ).map((m) => m.id);
      expect(expected).toHaveLength(9);
      const seen: string[] = [];
      let cursor = "";
      do {
        const filters = `kind=procedural&actor=${merger.id}&created_after=2025-12-31T00:00:00Z&created_before=2099-01-01T00:00:00Z`;
        const res = await merger.get(`/v1/memories?sort=${sort}&${filters}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
        expect(res.status).toBe(200);
        expect(res.body.data.total).toBe(9);
        seen.push(...ids(res));
        cursor = res.body.data.next_cursor;
      } while (cursor);
      expect(seen, sort).toEqual(expected);
    }
  });

  // On PostgreSQL requests share a pool of connections (ENGRAM_DB_POOL_SIZE, 10): a list that takes
  // one per hub at once leaves the other requests waiting for the pool while it runs.
  test.runIf(testPostgres())("across twelve hubs: the page is read on one connection, not one per hub", async () => {
    const many = await h.user("Many");
    const hubs = [many.personalHubId];
    for (let i = 0; i < 11; i++) hubs.push(await h.teamHub(many));
    for (const [i, hub] of hubs.entries()) {
      expect((await many.post("/v1/memories", { content: `hub note ${i}` }, { headers: { "x-hub-id": hub } })).status).toBe(201);
    }
    // A pool of its own, so that the connections it opens are this request's alone.
    const app = await openDatabase({ url: h.url! });
    const observer = new pg.Client({ connectionString: h.url });
    await observer.connect();
    const connections = async () =>
      (await observer.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")).rows[0]!.n;
    setDatabase(app);
    try {
      // One hub's list opens what any list needs (the membership, then the page and the total at once).
      expect((await many.get(`/v1/memories?hub_id=${hubs[0]}`)).status).toBe(200);
      const before = await connections();
      const res = await many.get("/v1/memories?limit=5");
      expect(res.status).toBe(200);
      expect(res.body.data.total).toBe(12);
      expect(ids(res)).toHaveLength(5);
      // It used to open one more for each hub past the first (up to the pool's ten).
      expect((await connections()) - before).toBeLessThanOrEqual(1);
    } finally {
      setDatabase(h.database);
      await observer.end();
      await app.close();
    }
  });
});

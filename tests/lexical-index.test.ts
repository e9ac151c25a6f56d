import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SqlRunner } from "@/lib/db/database.ts";
import { bestDocuments, lexicalIndexFor, parseTsvector, seesFinished } from "@/lib/recall/lexical-index.ts";
import { lexicalSearch, type LexicalQuery, type LexicalResult } from "@/lib/recall/lexical-search.ts";
import { pruneIndexChanges } from "@/lib/recall/prune-index-changes.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

// Issue 10 (latency): the lexical leg's in-process inverted index. On a corpus small enough that the
// SQL leg's candidate caps never bind, both must return the same chunks with the same scores,
// after every kind of write, in every process.

let h: Harness;
let ann: Client;
let mira: Client;
let teamHub: string;

/**
 * Another server process's view of the same database: its own index, the same connection.
 * `afterQuery` runs after each statement, before its rows are returned.
 */
function otherProcess(sql: SqlRunner, afterQuery?: (text: string, rows: Record<string, unknown>[]) => Promise<void>): SqlRunner {
  return {
    exec: (text) => sql.exec(text),
    query: async (text, params) => {
      const rows = await sql.query(text, params);
      await afterQuery?.(text, rows as Record<string, unknown>[]);
      return rows as never;
    },
  };
}

function summary(result: LexicalResult) {
  return {
    hubIds: result.stats.hubIds,
    terms: result.stats.terms,
    chunkCount: result.stats.chunkCount,
    hits: result.hits
      .map((hit) => ({ ...hit, bm25: Math.round(hit.bm25 * 1e9) / 1e9, matchedIdf: Math.round(hit.matchedIdf * 1e9) / 1e9 }))
      .sort((a, b) => (a.chunkId ?? a.memoryId).localeCompare(b.chunkId ?? b.memoryId)),
  };
}

async function sqlLeg(sql: SqlRunner, query: LexicalQuery): Promise<LexicalResult> {
  process.env.ENGRAM_LEXICAL_INDEX = "off";
  try {
    return await lexicalSearch(sql, query, {}, 50);
  } finally {
    delete process.env.ENGRAM_LEXICAL_INDEX;
  }
}

/** The index's answer, checked against the SQL leg's; returns the memories found. */
async function search(client: Client, text: string, sql = h.database.sql): Promise<string[]> {
  const query = { userId: client.id, text };
  const indexed = await lexicalSearch(sql, query, {}, 50);
  expect(summary(indexed)).toEqual(summary(await sqlLeg(sql, query)));
  return [...new Set(indexed.hits.map((hit) => hit.memoryId))];
}

async function push(client: Client, content: string, hubId?: string): Promise<string> {
  const res = await client.post("/v1/memories", { content }, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status).toBe(201);
  return res.body.data.id;
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  mira = await h.user("Mira");
  teamHub = await h.teamHub(ann, [[mira, "contributor"]]);
});

afterAll(async () => {
  await h.close();
});

describe("seesFinished", () => {
  it("holds only when the snapshot sees the transaction as finished", () => {
    const snap = (xmin: number, xmax: number, xip: number[] = []) => ({ xmin: BigInt(xmin), xmax: BigInt(xmax), xip: xip.map(BigInt) });
    expect(seesFinished(snap(10, 20), 15n)).toBe(true);
    expect(seesFinished(snap(10, 20, [17]), 15n)).toBe(true);
    expect(seesFinished(snap(10, 20), 9n)).toBe(true);
    // Still in progress for it.
    expect(seesFinished(snap(10, 20, [15]), 15n)).toBe(false);
    // Not started yet for it (at or past xmax).
    expect(seesFinished(snap(10, 20), 20n)).toBe(false);
    expect(seesFinished(snap(10, 20), 25n)).toBe(false);
    // No snapshot was read: it sees nothing.
    expect(seesFinished(snap(0, 0), 1n)).toBe(false);
  });
});

describe("parseTsvector", () => {
  it("reads every lexeme and its position count as the database stores them", async () => {
    const texts = [
      "It's O'Brien's café: the back\\slash path C:\\temp\\x and 'quoted' words, words, words.",
      "数据库备份保留多久 getUserById ERR_CONN_RESET docker-compose.yml",
      "",
    ];
    for (const text of texts) {
      const [row] = await h.database.sql.query<{ vec: string }>(`SELECT engram_tsvector($1)::text AS vec`, [text]);
      const expected = await h.database.sql.query<{ lexeme: string; tf: number }>(
        `SELECT u.lexeme, greatest(coalesce(array_length(u.positions, 1), 1), 1) AS tf FROM unnest(engram_tsvector($1)) AS u ORDER BY u.lexeme`,
        [text],
      );
      const parsed: { lexeme: string; tf: number }[] = [];
      parseTsvector(row!.vec, (lexeme, tf) => parsed.push({ lexeme, tf }));
      expect(parsed).toEqual(expected.map((e) => ({ lexeme: e.lexeme, tf: Number(e.tf) })));
    }
    const seen: [string, number][] = [];
    parseTsvector(`'a''b':1,2A 'c\\\\d' 'e':3`, (lexeme, tf) => seen.push([lexeme, tf]));
    expect(seen).toEqual([["a'b", 2], ["c\\d", 1], ["e", 1]]);
  });
});

describe("bestDocuments", () => {
  it("returns the first few in order, as a full sort would, ties included", () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const scores = Array.from({ length: 2000 }, () => Math.floor(random() * 50));
    const order = (x: number, y: number) => scores[y]! - scores[x]! || x - y;
    const docs = Array.from({ length: 2000 }, (_, i) => i).sort(() => random() - 0.5);
    for (const limit of [0, 1, 2, 10, 50, 1999, 2000, 5000]) {
      expect(bestDocuments(docs, limit, order)).toEqual([...docs].sort(order).slice(0, limit));
    }
  });
});

describe("the in-process lexical index", () => {
  it("matches the SQL leg through creates, processing, edits, archiving, moves and deletes, in every process", async () => {
    const second = otherProcess(h.database.sql);
    const kiwi = await push(ann, "# Kiwi rollout\n\nThe kiwi deploy runs behind a feature flag on Tuesdays.");
    const mango = await push(ann, "# Mango cache\n\nThe mango cache is warmed before the deploy.");
    const shared = await push(mira, "# Team deploy notes\n\nEvery deploy is announced in the kiwi channel first.", teamHub);

    // Not chunked yet: matched whole.
    expect((await search(ann, "kiwi deploy")).sort()).toEqual([kiwi, mango, shared].sort());
    expect((await search(ann, "kiwi deploy", second)).sort()).toEqual([kiwi, mango, shared].sort());
    expect(await search(mira, "mango")).toEqual([]);

    // Chunked: matched by chunk.
    await indexMemories(h.db, [kiwi, mango, shared], { embed: false });
    const chunked = await lexicalSearch(h.database.sql, { userId: ann.id, text: "kiwi" }, {}, 50);
    expect(chunked.hits.every((hit) => hit.chunkId !== null)).toBe(true);
    await search(ann, "kiwi deploy flag");

    // An edit: the new words match the whole memory at once, and its old chunks (the old version's
    // words, until re-processing replaces them) match nothing.
    const edited = await ann.patch(`/v1/memories/${mango}`, { content: "# Papaya cache\n\nThe papaya cache is warmed nightly." });
    expect(edited.status).toBe(200);
    expect(await search(ann, "papaya")).toEqual([mango]);
    expect(await search(ann, "papaya", second)).toEqual([mango]);
    expect(await search(ann, "mango")).toEqual([]);
    expect(await search(ann, "mango", second)).toEqual([]);
    await indexMemories(h.db, [mango], { embed: false });
    expect(await search(ann, "mango", second)).toEqual([]);
    expect(await search(ann, "mango")).toEqual([]);
    expect(await search(ann, "papaya nightly")).toEqual([mango]);

    // Archived: gone; active again: back.
    expect((await ann.patch(`/v1/memories/${kiwi}`, { state: "archived" })).status).toBe(200);
    expect(await search(ann, "feature flag", second)).toEqual([]);
    expect(await search(ann, "feature flag")).toEqual([]);
    expect((await ann.patch(`/v1/memories/${kiwi}`, { state: "active" })).status).toBe(200);
    expect(await search(ann, "feature flag")).toEqual([kiwi]);

    // Moved into the team hub: Mira finds it, in both processes.
    expect(await search(mira, "feature flag")).toEqual([]);
    const moved = await ann.post("/v1/memories/batch-move", { ids: [kiwi], hub_id: teamHub });
    expect(moved.status).toBe(200);
    expect(await search(mira, "feature flag")).toEqual([kiwi]);
    expect(await search(mira, "feature flag", second)).toEqual([kiwi]);

    // Deleted: gone.
    expect((await ann.delete(`/v1/memories/${kiwi}`)).status).toBe(200);
    expect(await search(mira, "feature flag")).toEqual([]);
    expect(await search(ann, "feature flag", second)).toEqual([]);
    expect((await search(ann, "deploy")).sort()).toEqual([shared]);
  });

  it("searches that arrive together after a burst of writes share their reloads, and each still matches the SQL leg", async () => {
    let reloads = 0;
    let armed = false;
    const late: Promise<LexicalResult>[] = [];
    const recall = () => lexicalSearch(sql, { userId: user.id, text: "lemon queue worker" }, {}, 50);
    const sql: SqlRunner = otherProcess(h.database.sql, async (text) => {
      if (!text.includes("FROM chunks c JOIN memories m ON m.id = c.memory_id")) return;
      reloads++;
      if (!armed || late.length > 0) return;
      // A busy server: another transaction (in CI, another database's test) begins right after the
      // first reload, then four more recalls read the same changes with that newer snapshot.
      await h.database.sql.query("SELECT pg_current_xact_id()::text AS xid");
      for (let i = 0; i < 4; i++) late.push(recall());
    });
    const user = await h.user("Burst");
    const warm = await push(user, "# Burst warm-up\n\nThe lemon queue drains overnight.");
    await search(user, "lemon queue", sql);
    const written = [];
    for (let i = 0; i < 6; i++) written.push(await push(user, `# Burst ${i}\n\nThe lemon queue worker ${i} restarts after a deploy.`));
    await indexMemories(h.db, written.slice(0, 3), { embed: false });
    reloads = 0;
    armed = true;
    // Four recalls at once, each with the same changes to catch up on, and four more a moment later.
    const found = await Promise.all(Array.from({ length: 4 }, recall));
    found.push(...(await Promise.all(late)));
    expect(late).toHaveLength(4);
    // One reload serves all eight: its snapshot sees every change their catch-ups read as finished,
    // however new their own snapshots. Without sharing, each reloaded them in turn; comparing whole
    // snapshots, the later four reloaded them again.
    expect(reloads).toBe(1);
    for (const result of found) expect(summary(result)).toEqual(summary(await sqlLeg(h.database.sql, { userId: user.id, text: "lemon queue worker" })));
    expect(new Set(found[7]!.hits.map((hit) => hit.memoryId))).toEqual(new Set([warm, ...written]));
  });

  it("a search whose turn comes reloads, in one statement, what the searches queued behind it need", async () => {
    // Three searches, each seeing one more write, wait behind the first one's reload. The second's turn
    // reloads its own stale memory and the third's together; the third then has nothing to reload.
    const reloads: string[][] = [];
    const gates = new Map<string, Promise<void>>();
    const held: { catchUps: string[]; reload?: () => void } = { catchUps: [] };
    const hold = (key: string) => {
      let release = () => {};
      gates.set(key, new Promise<void>((resolve) => (release = resolve)));
      return release;
    };
    const base = h.database.sql;
    let gating = false;
    const sql: SqlRunner = {
      exec: (text) => base.exec(text),
      query: async (text, params) => {
        const rows = await base.query(text, params);
        if (text.includes("FROM chunks c JOIN memories m ON m.id = c.memory_id")) {
          reloads.push([...(params?.[0] as string[])].sort());
          if (gating && reloads.length === 1) await gates.get("reload");
        } else if (gating && text.includes("engram_lexical_terms")) {
          const key = `catch-up ${held.catchUps.length}`;
          held.catchUps.push(key);
          await gates.get(key);
        }
        return rows as never;
      },
    };
    const user = await h.user("Queue");
    const warm = await push(user, "# Queue warm-up\n\nThe quince queue drains overnight.");
    await search(user, "quince", sql);
    const releaseReload = hold("reload");
    const releases = [hold("catch-up 0"), hold("catch-up 1"), hold("catch-up 2")];
    gating = true;
    const written: string[] = [];
    const searches: Promise<LexicalResult>[] = [];
    for (let i = 0; i < 3; i++) {
      written.push(await push(user, `# Quince ${i}\n\nThe quince worker ${i} restarts after a deploy.`));
      searches.push(lexicalSearch(sql, { userId: user.id, text: "quince worker" }, {}, 50));
      while (held.catchUps.length <= i) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    reloads.length = 0;
    releases[0]!(); // the first search syncs and sends its reload, which is held
    while (reloads.length < 1) await new Promise((resolve) => setTimeout(resolve, 5));
    releases[1]!();
    releases[2]!(); // the other two queue behind it
    await new Promise((resolve) => setTimeout(resolve, 50));
    releaseReload();
    const results = await Promise.all(searches);
    gating = false;
    expect(reloads).toEqual([[written[0]!], [written[1]!, written[2]!].sort()]);
    const expected = summary(await sqlLeg(h.database.sql, { userId: user.id, text: "quince worker" }));
    expect(summary(results[2]!)).toEqual(expected);
    expect(new Set(results[2]!.hits.map((hit) => hit.memoryId))).toEqual(new Set([warm, ...written]));
  });

  it("a search over the index's capacity leaves nothing queued behind", async () => {
    const user = await h.user("Tiny");
    const first = await push(user, "# Tiny\n\nThe tangerine queue.");
    const second = await push(user, "# Tiny 2\n\nThe tangerine worker.");
    await indexMemories(h.db, [first, second], { embed: false });
    const index = lexicalIndexFor(h.database.sql);
    // Its hub's two chunks are more than the index may hold: answered in SQL, its catch-up unused.
    process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS = "1";
    try {
      expect((await lexicalSearch(h.database.sql, { userId: user.id, text: "tangerine" }, {}, 50)).hits).toHaveLength(2);
    } finally {
      delete process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS;
    }
    expect((index as unknown as { waiting: unknown[] }).waiting).toEqual([]);
  });

  it("a hub loaded within a search supersedes its background read still under way", async () => {
    // Two hubs too big to load together within a search start loading in the background; one of
    // them is then loaded within a search of its own, and a memory of it is archived. The background
    // copy, read before the archive, must not replace the newer one when it lands.
    const lina = await h.user("Lina");
    const team = await h.teamHub(lina);
    const mine = [await push(lina, "The loquat deploy runs on Mondays."), await push(lina, "The loquat cache is warm.")];
    const theirs = [await push(lina, "The loquat queue in the team hub.", team), await push(lina, "The loquat worker in the team hub.", team)];
    await indexMemories(h.db, [...mine, ...theirs], { embed: false });
    let stalled = false;
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const base = h.database.sql;
    const sql: SqlRunner = {
      exec: (text) => base.exec(text),
      query: async (text, params) => {
        const rows = await base.query(text, params);
        if (text.includes("WITH page AS MATERIALIZED") && params?.[0] === team && !stalled) {
          stalled = true;
          await gate;
        }
        return rows as never;
      },
    };
    const index = lexicalIndexFor(sql, { inlineLoadMax: 3, loadPage: 500 });
    const query = (hubIds?: string[]) => lexicalSearch(sql, { userId: lina.id, text: "loquat", hubIds }, {}, 50);
    await query(); // 4 chunks > 3: both hubs load in the background; the team hub's read is held
    while (!stalled) await new Promise((resolve) => setTimeout(resolve, 5));
    await query([team]); // 2 chunks: loaded within this search
    expect((await lina.patch(`/v1/memories/${theirs[0]}`, { state: "archived" })).status).toBe(200);
    expect(new Set((await query([team])).hits.map((hit) => hit.memoryId))).toEqual(new Set([theirs[1]]));
    release();
    await index.settled();
    const after = await query([team]);
    expect(summary(after)).toEqual(summary(await sqlLeg(base, { userId: lina.id, text: "loquat", hubIds: [team] })));
    expect(after.hits.map((hit) => hit.memoryId)).toEqual([theirs[1]]);
  });

  it("keeps the best few of many matches: the first of the full ranking, which is the SQL leg's", async () => {
    const quin = await h.user("Quin");
    const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"];
    // Different term frequencies and lengths, and many exact ties (one quokka, one other word).
    const ids = [];
    for (const [i, word] of words.entries()) {
      ids.push(await push(quin, `quokka ${word}`));
      ids.push(await push(quin, `${"quokka ".repeat(1 + (i % 4))}${word} ${words.slice(0, i).join(" ")}`));
    }
    await indexMemories(h.db, ids.slice(0, 12), { embed: false });
    const sql = otherProcess(h.database.sql);
    const query = { userId: quin.id, text: "quokka" };
    // Every match fits under the limit: the index and the SQL leg return the same 24.
    const all = await lexicalSearch(sql, query, {}, 50);
    expect(summary(all)).toEqual(summary(await sqlLeg(sql, query)));
    expect(all.hits).toHaveLength(24);
    const key = (hit: { chunkId: string | null; memoryId: string }) => hit.chunkId ?? hit.memoryId;
    const ranked = [...all.hits].sort((x, y) => y.bm25 - x.bm25 || (key(x) < key(y) ? -1 : 1)).map(key);
    // Fewer than the matches: exactly the first of that ranking (ties to the lower id). The SQL leg
    // cuts on an approximation before its exact BM25, so it is not the reference here.
    for (const limit of [1, 3, 7, 23]) {
      const top = await lexicalSearch(sql, query, {}, limit);
      expect(top.hits.map(key), `limit ${limit}`).toEqual(ranked.slice(0, limit));
    }
  });

  it("rebuilds after the change log was pruned past its last catch-up", async () => {
    const stale = otherProcess(h.database.sql);
    const first = await push(ann, "Quince jam needs pectin.");
    expect(await search(ann, "quince", stale)).toEqual([first]);
    const index = lexicalIndexFor(stale);
    const since = index.since;
    expect(since).not.toBeNull();
    const second = await push(ann, "Quince trees flower late.");
    // Both writes are older than a zero retention: pruned, and the horizon moves past `since`. (On a
    // PostgreSQL server shared with other test databases, a row is pruned only once every transaction
    // older than it in the cluster has ended: prune until the second write's row is gone.)
    const horizon = async () => BigInt((await h.database.sql.query<{ xid: string }>(`SELECT xid::text AS xid FROM recall_index_horizon`))[0]!.xid);
    const left = async () =>
      Number((await h.database.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM recall_index_changes WHERE memory_id = $1::uuid`, [second]))[0]!.n);
    // (Generous: a transaction held open in another test database holds the prune back meanwhile.)
    const deadline = Date.now() + 45_000;
    await pruneIndexChanges(h.database.sql, 0);
    while (((await horizon()) < since!.xmin || (await left()) > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      await pruneIndexChanges(h.database.sql, 0);
    }
    expect(await horizon()).toBeGreaterThanOrEqual(since!.xmin);
    expect(await left()).toBe(0);
    // The stale process never read the second write's change row; it must rebuild, not miss it.
    expect((await search(ann, "quince", stale)).sort()).toEqual([first, second].sort());
    expect(index.since!.xmax > since!.xmax).toBe(true);
  });

  it("reads a large hub in the background, answering in SQL meanwhile, without missing writes made during the read", async () => {
    // Writes land between the read's first and second page, and a search meanwhile (which moves
    // the process's catch-up past them) must not make the index forget them.
    let during = "";
    let pages = 0;
    // The writes wait for the first search to finish: it compares its answer with the SQL leg's,
    // and a write landing between the two would make them differ (CI saw it once).
    let firstSearched = () => {};
    const firstSearch = new Promise<void>((resolve) => (firstSearched = resolve));
    const sql: SqlRunner = otherProcess(h.database.sql, async (text) => {
      if (!text.includes("WITH page AS MATERIALIZED") || ++pages !== 1) return;
      await firstSearch;
      during = await push(ann, "Another deploy, of the medlar service.");
      expect((await ann.patch(`/v1/memories/${archived}`, { state: "archived" })).status).toBe(200);
      expect(await search(ann, "deploy", sql)).toContain(during);
    });
    const older = await Promise.all(["alder", "birch", "cedar", "fir", "elder"].map((tree) => push(ann, `The ${tree} deploy went out on Monday.`)));
    await indexMemories(h.db, older, { embed: false });
    const archived = older[0]!;
    // Every hub counts as large here, and pages are 3 memories: the read takes many statements.
    const index = lexicalIndexFor(sql, { inlineLoadMax: -1, loadPage: 3 });
    // The first search starts the read and is answered in SQL (search() checks the answers agree).
    await search(ann, "deploy", sql);
    firstSearched();
    await index.settled();
    expect(pages).toBeGreaterThan(1);
    expect(index.size).toBeGreaterThan(0);
    const after = await search(ann, "deploy", sql);
    expect(after).toContain(during);
    expect(after).not.toContain(archived);
    expect((await ann.patch(`/v1/memories/${archived}`, { state: "active" })).status).toBe(200);
    expect(await search(ann, "deploy", sql)).toContain(archived);
  });

  it("falls back to SQL for hubs that would overflow the index", async () => {
    const sql = otherProcess(h.database.sql);
    const id = await push(ann, "Rhubarb crumble for the offsite.");
    process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS = "1";
    try {
      expect(await search(ann, "rhubarb", sql)).toEqual([id]);
      expect(lexicalIndexFor(sql).size).toBe(0);
    } finally {
      delete process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS;
    }
  });

  it("evicts the least recently searched hub to load another within its capacity", async () => {
    const sql = otherProcess(h.database.sql);
    await indexMemories(h.db, [await push(ann, "Damson gin, personal notes."), await push(mira, "Damson orchard visit, team notes.", teamHub)], { embed: false });
    const counts = await h.database.sql.query<{ hub_id: string; chunk_count: number }>(
      `SELECT hub_id, chunk_count FROM recall_hub_stats WHERE hub_id = ANY($1::uuid[])`,
      [[ann.personalHubId, teamHub]],
    );
    const size = new Map(counts.map((row) => [row.hub_id, Number(row.chunk_count)]));
    const personal = size.get(ann.personalHubId)!;
    const team = size.get(teamHub)!;
    process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS = String(Math.max(personal, team) + 1);
    try {
      const index = lexicalIndexFor(sql);
      await lexicalSearch(sql, { userId: ann.id, hubIds: [ann.personalHubId], text: "damson" }, {}, 50);
      const afterPersonal = index.size;
      expect(afterPersonal).toBeGreaterThanOrEqual(personal);
      // Both hubs together do not fit: SQL answers, and nothing is loaded or evicted.
      expect(await search(ann, "damson", sql)).toHaveLength(2);
      expect(index.size).toBe(afterPersonal);
      const teamOnly = await lexicalSearch(sql, { userId: ann.id, hubIds: [teamHub], text: "damson" }, {}, 50);
      expect(teamOnly.hits).toHaveLength(1);
      // The team hub alone fits once the personal one is evicted; a search still naming the evicted
      // hub (one whose sync ran before the eviction) gets null, and its caller asks SQL.
      expect(index.search([ann.personalHubId, teamHub], [{ term: "damson", idf: 1 }], 1, 1.2, 0.75, 10)).toBeNull();
      expect(index.search([teamHub], [{ term: "damson", idf: 1 }], 1, 1.2, 0.75, 10)?.hits).toHaveLength(1);
      expect(index.size).toBeLessThan(afterPersonal + team);
      expect(index.size).toBeGreaterThanOrEqual(team);
    } finally {
      delete process.env.ENGRAM_LEXICAL_INDEX_MAX_CHUNKS;
    }
  });

  // Several connections only: a transaction left open elsewhere on the server (a backup, a stuck
  // session) holds back every snapshot's xmin; catching up must still read each change once, not
  // every change since that transaction began (which grew with every write until the index rebuilt
  // on every search).
  it.skipIf(!testPostgres())("reads each change once while another transaction holds the snapshot xmin back", async () => {
    const seen: number[] = [];
    const sql = otherProcess(h.database.sql, async (text, rows) => {
      if (text.includes("engram_lexical_terms")) seen.push(rows.filter((row) => row.change_id !== null).length);
    });
    expect(await search(ann, "yarrow", sql)).toEqual([]);
    const pinning = new pg.Client({ connectionString: h.url });
    await pinning.connect();
    try {
      await pinning.query("BEGIN");
      await pinning.query("SELECT pg_current_xact_id()");
      const id = await push(ann, "Yarrow by the north fence.");
      seen.length = 0;
      expect(await search(ann, "yarrow", sql)).toEqual([id]);
      expect(seen[0]).toBeGreaterThan(0);
      expect(await search(ann, "yarrow", sql)).toEqual([id]);
      expect(await search(ann, "yarrow", sql)).toEqual([id]);
      expect(seen.slice(1)).toEqual([0, 0]);
    } finally {
      await pinning.query("ROLLBACK");
      await pinning.end();
    }
  });

  // Several connections only: a transaction that commits after a catch-up whose snapshot it was
  // running in must still reach the index (its change row has an xid at or above that xmin).
  it.skipIf(!testPostgres())("sees a write whose transaction commits after a catch-up began", async () => {
    const id = await push(ann, "Sorrel soup recipe.");
    expect(await search(ann, "sorrel")).toEqual([id]);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const wrote = new Promise<void>((resolve) => (written = resolve));
    const slow = h.db.$transaction(
      async (tx) => {
        await tx.memory.update({ where: { id }, data: { content: "Tarragon soup recipe.", processingStatus: "pending" } });
        written();
        await gate;
      },
      { timeout: 30_000 },
    );
    await wrote;
    // The index catches up while the edit is uncommitted: it still sees the old words.
    expect(await search(ann, "sorrel")).toEqual([id]);
    release();
    await slow;
    expect(await search(ann, "tarragon")).toEqual([id]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database.ts";
import { eventBus } from "@/lib/events/event-bus.ts";
import type { EventRecord } from "@/lib/events/event-types.ts";
import { createHarness, testPostgres, type Client, type Harness } from "./support/harness.ts";
import { openEventStream } from "./support/sse-client.ts";

/**
 * The PostgreSQL path of the event stream: LISTEN/NOTIFY between separate
 * connection pools, i.e. what two server processes sharing one database see.
 * Needs a real server (PGlite serves one session only): runs under `npm run test:postgres`
 * (`npm run test:postgres -- tests/events-postgres.test.ts` alone) and is skipped by `npm test`.
 */
describe.skipIf(!testPostgres())("events on PostgreSQL (LISTEN/NOTIFY across processes)", () => {
  let h: Harness;
  let other: Database;
  let ann: Client;
  let bob: Client;

  beforeAll(async () => {
    h = await createHarness();
    // A second "server process": its own pool and its own LISTEN connection.
    other = await openDatabase({ url: h.url!, migrate: false });
    ann = await h.user("Ann");
    bob = await h.user("Bob");
  });

  afterAll(async () => {
    await other?.close();
    await h?.close();
  });

  it("a LISTEN the server refuses leaves no connection behind (each retry would leak one)", async () => {
    const name = `listen-refused-${Math.random().toString(36).slice(2)}`;
    const url = new URL(h.url!);
    url.searchParams.set("application_name", name);
    const refused = await openDatabase({ url: url.toString(), migrate: false });
    try {
      // Connected, then refused: a channel of nothing but a quote leaves LISTEN "" (a zero-length identifier).
      await expect(refused.listen('"', () => undefined)).rejects.toThrow(/zero-length/);
      const count = async () => (await h.database.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1", [name]))[0]!.n;
      for (let waited = 0; (await count()) > 0 && waited < 2000; waited += 50) await new Promise((r) => setTimeout(r, 50));
      expect(await count()).toBe(0);
    } finally {
      await refused.close();
    }
  });

  it("a write through one process reaches the other's subscribers after commit, in order", async () => {
    const received: EventRecord[] = [];
    const unsubscribe = await eventBus(other).subscribe({ userId: ann.id, accepts: () => true, deliver: (e) => received.push(e), resync: () => undefined });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await ann.post("/v1/memories", { content: `note ${i}` });
      ids.push(res.body.data.id);
    }
    const deadline = Date.now() + 5000;
    while (received.length < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    unsubscribe();
    expect(received.map((e) => e.entity_id)).toEqual(ids);
    const seqs = received.map((e) => BigInt(e.seq));
    expect(seqs.every((s, i) => i === 0 || s > seqs[i - 1]!)).toBe(true);
  });

  it("the SSE stream filters by membership and replays with Last-Event-ID", async () => {
    const hub = await h.teamHub(ann, [[bob, "viewer"]]);
    const annStream = await openEventStream(ann.key);
    const bobStream = await openEventStream(bob.key, `?hub_id=${hub}`);
    await annStream.waitFor((e) => e.event === "ready");
    await bobStream.waitFor((e) => e.event === "ready");
    const shared = (await ann.post("/v1/memories", { content: "shared note" }, { headers: { "x-hub-id": hub } })).body.data.id;
    const own = (await ann.post("/v1/memories", { content: "private note" })).body.data.id;
    const first = await bobStream.waitFor((e) => e.data?.entity_id === shared);
    await annStream.waitFor((e) => e.data?.entity_id === own);
    await bobStream.close();
    const missed = (await ann.post("/v1/memories", { content: "while bob was away" }, { headers: { "x-hub-id": hub } })).body.data.id;
    const resumed = await openEventStream(bob.key, `?hub_id=${hub}`, { "last-event-id": first.id! });
    await resumed.waitFor((e) => e.data?.entity_id === missed);
    expect(resumed.payload().map((e) => e.data.entity_id)).toEqual([missed]);
    expect(bobStream.payload().map((e) => e.data.entity_id)).not.toContain(own);
    await annStream.close();
    await resumed.close();
  });
  it("a stream that did not resume gets no old events when the listening connection comes back", async () => {
    const hub = await h.teamHub(ann, []);
    const old = (await ann.post("/v1/memories", { content: "from before the stream" }, { headers: { "x-hub-id": hub } })).body.data.id;
    const s = await openEventStream(ann.key, `?hub_id=${hub}`);
    await s.waitFor((e) => e.event === "ready");
    // Drop every LISTEN connection: each process reconnects and asks its streams to catch up (resync).
    await h.db.$queryRawUnsafe(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()`);
    await new Promise((r) => setTimeout(r, 1500));
    const marker = (await ann.post("/v1/memories", { content: "after the reconnect" }, { headers: { "x-hub-id": hub } })).body.data.id;
    await s.waitFor((e) => e.data?.entity_id === marker, 10_000);
    expect(s.payload().map((e) => e.data.entity_id)).toEqual([marker]);
    expect(s.payload().map((e) => e.data.entity_id)).not.toContain(old);
    await s.close();
  });
});

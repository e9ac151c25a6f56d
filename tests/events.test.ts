import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { setDatabase } from "@/lib/db/database.ts";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { MAX_PENDING_EVENTS } from "@/lib/events/event-bus.ts";
import { EVENTS_CHANNEL } from "@/lib/events/event-types.ts";
import { eventsRetentionMs, pruneEvents } from "@/lib/events/prune-events.ts";
import { CURSOR_REFRESH_PINGS, MAX_STREAMS_PER_USER, openEventStream as openStreamFor, PING_INTERVAL_MS } from "@/lib/events/stream-events.ts";
import { failMemory } from "@/lib/processing/processing-steps.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { openEventStream, readSse, type SseStream } from "./support/sse-client.ts";

let h: Harness;
let ann: Client;
let mira: Client;
let bob: Client;
let hub: string;
const open: SseStream[] = [];

async function stream(client: Client, query = "", headers: Record<string, string> = {}) {
  const s = await openEventStream(client.key, query, headers);
  open.push(s);
  if (s.status === 200) await s.waitFor((e) => e.event === "ready");
  return s;
}

async function push(client: Client, content: string, hubId: string) {
  const res = await client.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as string;
}

/** Events reach every stream through the bus asynchronously: a later marker event proves earlier ones were not held back. */
async function settle(client: Client, s: SseStream, hubId: string) {
  const marker = await push(client, `marker ${Math.random()}`, hubId);
  await s.waitFor((e) => e.event === "memory.created" && e.data.entity_id === marker);
  return marker;
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  mira = await h.user("Mira");
  bob = await h.user("Bob");
  hub = await h.teamHub(ann, [[mira, "contributor"]]);
});

afterAll(async () => {
  for (const s of open) await s.close();
  await h?.close();
});

describe("GET /v1/events/stream", () => {
  it("sends ready first, then the events of hubs the caller reads — and nothing of others", async () => {
    const annStream = await stream(ann);
    const bobStream = await stream(bob);
    expect(annStream.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(annStream.events[0]).toMatchObject({ event: "ready", data: { user_id: ann.id } });

    const id = await push(mira, "# Runbook\n\nRestart with kubectl.", hub);
    const created = await annStream.waitFor((e) => e.event === "memory.created");
    expect(created.data).toEqual({ id: expect.any(String), type: "memory.created", hub_id: hub, actor_id: mira.id, entity_id: id, created_at: expect.any(String) });
    expect(created.id).toMatch(/^\d+$/);
    // Bob reads only his own hub: a marker there arrives, Mira's push never did.
    const marker = await settle(bob, bobStream, bob.personalHubId);
    expect(bobStream.payload().map((e) => e.data.entity_id)).toEqual([marker]);
    expect(annStream.payload().map((e) => e.data.entity_id)).not.toContain(marker);
  });

  it("filters by hub_id and types; an unreadable hub is not found, an unknown type a 400", async () => {
    const filtered = await stream(ann, `?hub_id=${hub}&types=memory.deleted`);
    const all = await stream(ann, `?types=memory.*`);
    const id = await push(ann, "to be deleted", hub);
    await push(ann, "elsewhere", ann.personalHubId);
    expect((await ann.delete(`/v1/memories/${id}`)).status).toBe(200);
    await filtered.waitFor((e) => e.event === "memory.deleted" && e.data.entity_id === id);
    await all.waitFor((e) => e.event === "memory.deleted" && e.data.entity_id === id);
    expect(filtered.payload().map((e) => e.event)).toEqual(["memory.deleted"]);
    expect(all.payload().map((e) => e.event)).toEqual(["memory.created", "memory.created", "memory.deleted"]);
    expect((await stream(bob, `?hub_id=${hub}`)).status).toBe(404);
    const flavoured = await stream(ann, `?hub_id=${hub}&flavour=vanilla`);
    expect(flavoured.headers.get("x-engram-warning")).toBe("ignored unknown query parameters: flavour");
    const bad = await stream(ann, "?types=memory.exploded");
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text!).error.code).toBe("invalid_request");
    expect((await openEventStream("egk_nope")).status).toBe(401);
  });

  it("a hub_id written in upper case filters to that hub as the lower-case id does", async () => {
    const upper = await stream(ann, `?hub_id=${hub.toUpperCase()}&types=memory.created`);
    expect(upper.status).toBe(200);
    const id = await push(ann, `shouted hub ${Math.random()}`, hub);
    await upper.waitFor((e) => e.event === "memory.created" && e.data.entity_id === id);
  });

  // decisions.md's events: every change a client shows (the topic tree, where a memory is filed) is told.
  it("tells of every topic change (topic.changed) and of filing a memory (memory.updated), one event each", async () => {
    const s = await stream(ann, `?hub_id=${hub}&types=topic.changed,memory.updated`);
    const memory = await push(ann, "a note to file", hub);
    let topic = "";
    let second = "";
    const steps: [string, () => Promise<{ status: number }>, string, () => string | null][] = [
      ["create", async () => {
        const res = await ann.post("/v1/topics", { name: "Event shelf", hub_id: hub });
        topic = res.body.data.id;
        second = (await ann.post("/v1/topics", { name: "Second shelf", hub_id: hub })).body.data.id;
        return res;
      }, "topic.changed", () => second],
      ["rename", () => ann.patch(`/v1/topics/${topic}`, { name: "Event shelf, renamed" }), "topic.changed", () => topic],
      ["reorder", () => ann.post("/v1/topics/reorder", { operations: [{ topic_id: second, position: 0 }] }), "topic.changed", () => null],
      ["file", () => ann.post(`/v1/topics/${topic}/memories`, { memory_id: memory }), "memory.updated", () => memory],
      ["unfile", () => ann.delete(`/v1/topics/${topic}/memories/${memory}`), "memory.updated", () => memory],
      ["archive", () => ann.post(`/v1/topics/${topic}/archive`, {}), "topic.changed", () => topic],
      ["restore", () => ann.post(`/v1/topics/${topic}/restore`, {}), "topic.changed", () => topic],
      ["delete", () => ann.delete(`/v1/topics/${topic}`), "topic.changed", () => topic],
    ];
    for (const [label, run, type, entity] of steps) {
      const before = s.payload().length;
      const res = await run();
      expect(res.status, label).toBeLessThan(300);
      // "create" made two topics: two events.
      const expected = before + (label === "create" ? 2 : 1);
      await s.waitFor(() => s.payload().length >= expected);
      const last = s.payload()[expected - 1]!;
      expect([label, last.event], label).toEqual([label, type]);
      if (entity() !== null) expect(last.data.entity_id, label).toBe(entity());
    }
    // Doing nothing tells nothing: unfiling a memory that is not in the topic, an update or a reorder
    // that sets what is already there, filing a memory where it is. The events that follow are those
    // of the filings that change something, then the rename.
    const settled = s.payload().length;
    expect((await ann.delete(`/v1/topics/${second}/memories/${memory}`)).body.data.unassigned).toBe(false);
    const unchanged = (await ann.get(`/v1/topics/${second}`)).body.data;
    const same = await ann.patch(`/v1/topics/${second}`, { name: unchanged.name, description: unchanged.description, icon: unchanged.icon, pinned: unchanged.pinned, position: unchanged.position, parent_id: null });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data.updated_at).toBe(unchanged.updated_at);
    expect((await ann.patch(`/v1/topics/${second}`, {})).status).toBe(200);
    expect((await ann.post("/v1/topics/reorder", { operations: [{ topic_id: second, position: unchanged.position }] })).status).toBe(200);
    // Filing a memory where it already is: answered as a filing, told to no one, updated_at left alone.
    expect((await ann.post(`/v1/topics/${second}/memories`, { memory_id: memory })).status).toBe(200);
    const filed = (await ann.get(`/v1/memories/${memory}`)).body.data;
    await s.waitFor(() => s.payload().length > settled);
    const settledAgain = s.payload().length;
    const again = await ann.post(`/v1/topics/${second}/memories`, { memory_id: memory });
    expect(again.body.data).toEqual({ topic_id: second, memory_id: memory, assigned: true, previous_topic_id: second });
    expect((await ann.get(`/v1/memories/${memory}`)).body.data.updated_at).toBe(filed.updated_at);
    expect((await ann.delete(`/v1/topics/${second}/memories/${memory}`)).body.data.unassigned).toBe(true);
    expect((await ann.patch(`/v1/topics/${second}`, { name: "Second shelf, renamed" })).status).toBe(200);
    await s.waitFor(() => s.payload().length > settledAgain + 1);
    expect(s.payload().slice(settled).map((e) => [e.event, e.data.entity_id])).toEqual([["memory.updated", memory], ["memory.updated", memory], ["topic.changed", second]]);
  });

  it("replays everything missed after a dropped connection (Last-Event-ID), in order, without duplicates", async () => {
    const first = await stream(mira, `?hub_id=${hub}`);
    const a = await push(ann, "before the drop", hub);
    const seen = await first.waitFor((e) => e.data?.entity_id === a);
    await first.close();
    const missed = [];
    for (let i = 0; i < 5; i++) missed.push(await push(ann, `while away ${i}`, hub));
    const resumed = await stream(mira, `?hub_id=${hub}`, { "last-event-id": seen.id! });
    const after = await push(ann, "after the reconnect", hub);
    await resumed.waitFor((e) => e.data?.entity_id === after);
    expect(resumed.payload().map((e) => e.data.entity_id)).toEqual([...missed, after]);
    const seqs = resumed.payload().map((e) => BigInt(e.id!));
    expect([...seqs].sort((x, y) => (x < y ? -1 : 1))).toEqual(seqs);
  });

  it("tells the hub's readers, live, that a dream finished (dream.completed)", async () => {
    const miraStream = await stream(mira, `?hub_id=${hub}&types=dream.completed`);
    const bobStream = await stream(bob);
    await push(ann, "# Deploy\n\nRoll back with the previous image tag.", hub);
    const trigger = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hub } });
    expect(trigger.status, trigger.text).toBe(202);
    const runId = trigger.body.data.run_id as string;
    expect(await runDreamRunOnce(h.db, runId)).toBe(true);
    const done = await miraStream.waitFor((e) => e.event === "dream.completed");
    expect(done.data).toEqual({ id: expect.any(String), type: "dream.completed", hub_id: hub, actor_id: ann.id, entity_id: runId, created_at: expect.any(String) });
    expect(done.id).toMatch(/^\d+$/);
    // Bob reads no part of that hub.
    await settle(bob, bobStream, bob.personalHubId);
    expect(bobStream.payload().map((e) => e.event)).not.toContain("dream.completed");
  });

  it("a member removed mid-stream stops receiving at once", async () => {
    const carl = await h.user("Carl");
    // Adding someone by id needs them findable: an invite to their e-mail does it.
    await ann.post(`/v1/hubs/${hub}/invites`, { email: carl.email });
    expect((await ann.post(`/v1/hubs/${hub}/members`, { user_id: carl.id, role: "viewer" })).status).toBe(201);
    const carlStream = await stream(carl);
    const annStream = await stream(ann);
    const before = await push(ann, "carl can see this", hub);
    await carlStream.waitFor((e) => e.data?.entity_id === before);
    expect((await ann.delete(`/v1/hubs/${hub}/members/${carl.id}`)).status).toBe(200);
    const secret = await push(ann, "carl must not see this", hub);
    await annStream.waitFor((e) => e.data?.entity_id === secret);
    await settle(carl, carlStream, carl.personalHubId);
    expect(carlStream.payload().map((e) => e.data.entity_id)).not.toContain(secret);
    // Nor does a resume with an old cursor hand it over.
    const resumed = await stream(carl, "", { "last-event-id": "0" });
    await settle(carl, resumed, carl.personalHubId);
    expect(resumed.payload().map((e) => e.data.entity_id)).not.toContain(secret);
  });

  it("a memory moved out of a hub while its processing failed is announced where it went, not to the hub it left", async () => {
    const id = await push(ann, "# Scan\n\nunreadable attachment", hub);
    const memory = await h.db.memory.findUniqueOrThrow({ where: { id } });
    const miraStream = await stream(mira);
    const annStream = await stream(ann);
    // The move commits after the failing job read the memory and before it writes the failure.
    const moveAway = async () => expect((await ann.post("/v1/memories/batch-move", { ids: [id], hub_id: ann.personalHubId })).body.data.moved).toBe(1);
    const db = changedBefore(h.db, ["$transaction"], moveAway);
    expect(await failMemory({ db, memory, now: () => new Date() }, "Error: extraction failed", { indexed: true })).toBe(true);
    const processed = await annStream.waitFor((e) => e.event === "memory.processed" && e.data.entity_id === id);
    expect(processed.data.hub_id).toBe(ann.personalHubId);
    const notification = await h.db.notification.findFirstOrThrow({ where: { kind: "memory_processing_failed", sourceId: id } });
    expect(notification.hubId).toBe(ann.personalHubId);
    // Mira heard the memory leave her hub (memory.deleted) and nothing of it since.
    await settle(mira, miraStream, hub);
    expect(miraStream.payload().filter((e) => e.data.entity_id === id).map((e) => e.event)).toEqual(["memory.deleted"]);
  });

  it("a stream that does not resume still gets an event committed while it was opening (after it read the newest id)", async () => {
    let during = "";
    // The real database; a push commits right after the stream read the newest event's id, before it listens.
    const db = new Proxy(h.db, {
      get(target, key) {
        if (key !== "event") return Reflect.get(target, key);
        return new Proxy(target.event, {
          get(model, method) {
            if (method !== "aggregate") return Reflect.get(model, method);
            return async (...args: Parameters<typeof model.aggregate>) => {
              const newest = await model.aggregate(...args);
              if (!during) during = await push(ann, `committed while the stream opened ${Math.random()}`, hub);
              return newest;
            };
          },
        });
      },
    });
    const s = await readSse(await openStreamFor(sessionContext(h, mira, db), { hubId: hub }));
    open.push(s);
    await s.waitFor((e) => e.event === "ready");
    const after = await push(ann, `after the stream opened ${Math.random()}`, hub);
    await s.waitFor((e) => e.data?.entity_id === after);
    expect(s.payload().map((e) => e.data.entity_id)).toEqual([during, after]);
  });

  it("sends a ping every 25 s, and not before", async () => {
    // Only the interval timers are simulated: the database, fetch and the stream's own I/O run for real.
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const s = await stream(ann);
      vi.advanceTimersByTime(PING_INTERVAL_MS - 1);
      await settle(ann, s, ann.personalHubId);
      expect(s.events.filter((e) => e.event === "ping")).toEqual([]);
      vi.advanceTimersByTime(1);
      expect((await s.waitFor((e) => e.event === "ping")).data).toEqual({ time: expect.any(String) });
      vi.advanceTimersByTime(PING_INTERVAL_MS);
      await s.waitFor(() => s.events.filter((e) => e.event === "ping").length === 2);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("GET /v1/events/stream: nothing lost to a failed check", () => {
  it("an event whose membership check fails is replayed to the streams that wanted it", async () => {
    let failures = 1;
    const db = h.database.prisma.$extends({
      query: {
        hubMember: {
          async findMany({ args, query }) {
            // The bus's audience check: who among the subscribers is a member of the event's hub.
            const where = args.where as { userId?: { in?: unknown } } | undefined;
            if (failures > 0 && where?.userId?.in) {
              failures -= 1;
              throw new Error("database hiccup");
            }
            return query(args);
          },
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    try {
      const s = await stream(mira, `?hub_id=${hub}`);
      const id = await push(ann, "delivered despite a hiccup", hub);
      await s.waitFor((e) => e.data?.entity_id === id);
      expect(failures).toBe(0);
    } finally {
      setDatabase(h.database);
    }
  });
});

describe("GET /v1/events/stream: a burst faster than the membership checks", () => {
  it(`holds at most ${MAX_PENDING_EVENTS} events waiting for their check; the streams the rest were for replay them from the table, losing none`, async () => {
    let checks = 0;
    let gate: Promise<void> | null = null;
    let open = () => {};
    const db = h.database.prisma.$extends({
      query: {
        hubMember: {
          async findMany({ args, query }) {
            // The bus's audience check: once the gate is shut, each waits until the test lets the database answer.
            const where = args.where as { userId?: { in?: unknown } } | undefined;
            if (gate && where?.userId?.in) {
              checks += 1;
              await gate;
            }
            return query(args);
          },
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    let heard = 0;
    const unlisten = await h.database.listen(EVENTS_CHANNEL, () => void (heard += 1));
    let s: SseStream | undefined;
    try {
      s = await stream(mira, `?hub_id=${hub}`);
      // The stream is live (its catch-up from the table done) before the burst.
      await settle(ann, s, hub);
      gate = new Promise<void>((resolve) => (open = resolve));
      heard = 0;
      const burst = Array.from({ length: MAX_PENDING_EVENTS + 500 }, (_, i) => `burst ${i}`);
      await emitEvent(h.db, burst.map((entityId) => ({ type: "memory.updated" as const, hubId: hub, actorId: ann.id, entityId })));
      // Every notification has reached the process while the first check still waits.
      await vi.waitFor(() => expect(heard).toBe(burst.length), { timeout: 10_000 });
      open();
      await s.waitFor((e) => e.data?.entity_id === burst.at(-1), 30_000);
      const seen = s.payload().map((e) => e.data.entity_id as string).filter((id) => id.startsWith("burst "));
      expect(seen).toEqual(burst);
      // One check per event held, not one per event of the burst.
      expect(checks).toBeLessThanOrEqual(MAX_PENDING_EVENTS + 1);
    } finally {
      open();
      await s?.close();
      await unlisten();
      setDatabase(h.database);
    }
  });
});

describe("GET /v1/events/stream: a delivery that fails", () => {
  // A catch-up (replay) that failed closed the stream without a word: the client saw it end as a server
  // restart or a network cut ends one, and had no way to tell the server had failed.
  it("ends the stream with an error event, not silently", async () => {
    const s = await stream(mira, `?hub_id=${hub}`);
    // Memberships become unreadable as the event commits (a database failing mid-stream): the bus's check
    // fails, the stream catches up from the table, and that fails too.
    await h.db.$transaction(async (tx) => {
      await emitEvent(tx, { type: "hub.updated", hubId: hub, actorId: ann.id, entityId: hub });
      await tx.$executeRawUnsafe(`ALTER TABLE hub_members RENAME TO hub_members_away`);
    });
    try {
      const error = await s.waitFor((e) => e.event === "error");
      expect(error.data).toEqual({ code: "internal", message: "The stream failed on the server" });
      await s.ended;
    } finally {
      await h.db.$executeRawUnsafe(`ALTER TABLE hub_members_away RENAME TO hub_members`);
    }
  });
});

describe("GET /v1/events/stream: who may keep listening, and to what", () => {
  it("a stream ends at the next ping once its API key is revoked (and goes on while the key is valid)", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const made = (await ann.post("/v1/auth/api-keys", { name: "stream" })).body.data;
      const s = await openEventStream(made.key);
      open.push(s);
      await s.waitFor((e) => e.event === "ready");
      vi.advanceTimersByTime(PING_INTERVAL_MS);
      await s.waitFor((e) => e.event === "ping");
      // The check after that ping found the key valid: events still flow.
      await settle(ann, s, ann.personalHubId);
      expect(s.events.some((e) => e.event === "error")).toBe(false);
      expect((await ann.delete(`/v1/auth/api-keys/${made.id}`)).body.data.revoked).toBe(true);
      vi.advanceTimersByTime(PING_INTERVAL_MS);
      expect((await s.waitFor((e) => e.event === "error")).data.code).toBe("unauthorized");
      await s.ended;
    } finally {
      vi.useRealTimers();
    }
  });

  it("a revoked key ends at the next ping a replay that waits for the client to read, with no further page", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const made = (await ann.post("/v1/auth/api-keys", { name: "stalled stream" })).body.data;
      const from = String((await h.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0);
      await emitEvent(h.db, Array.from({ length: 700 }, (_, i) => ({ type: "memory.updated" as const, hubId: ann.personalHubId, actorId: ann.id, entityId: `filler ${i}` })));
      const s = await openEventStream(made.key, "", { "last-event-id": from }, { paused: true });
      open.push(s);
      // The first page is queued and the replay waits for the client to read it.
      await new Promise((r) => setTimeout(r, 500));
      expect((await ann.delete(`/v1/auth/api-keys/${made.id}`)).body.data.revoked).toBe(true);
      vi.advanceTimersByTime(PING_INTERVAL_MS);
      // The check runs now, not once the client has read the replay: nothing after the queued page is sent.
      await new Promise((r) => setTimeout(r, 500));
      s.resume();
      expect((await s.waitFor((e) => e.event === "error")).data.code).toBe("unauthorized");
      await s.ended;
      expect(s.payload().filter((e) => e.event !== "error").length).toBeLessThanOrEqual(500);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a stream whose replay waits for a client that stopped reading holds at most a small buffer of live events: the rest come from the table once it reads on", async () => {
    const gus = await h.user("Gus");
    const from = String((await h.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0);
    await emitEvent(h.db, Array.from({ length: 700 }, (_, i) => ({ type: "memory.updated" as const, hubId: gus.personalHubId, actorId: gus.id, entityId: `filler ${i}` })));
    const s = await openEventStream(gus.key, "", { "last-event-id": from }, { paused: true });
    open.push(s);
    const watcher = await stream(gus);
    await new Promise((r) => setTimeout(r, 500));
    // Live events while the replay waits (2 KiB each, 1.2 MiB in all): more than a stream may queue.
    const live = Array.from({ length: 600 }, (_, i) => `live ${i} ${"x".repeat(2048)}`);
    await emitEvent(h.db, live.map((entityId) => ({ type: "memory.updated" as const, hubId: gus.personalHubId, actorId: gus.id, entityId })));
    // The bus hands each event to both streams at once: once the reading one has the last, the paused one was offered all.
    await watcher.waitFor((e) => e.data?.entity_id === live.at(-1), 20_000);
    s.resume();
    // Not cut off for them (they were never queued for it): the replay goes on to read them, in order, once each.
    const marker = await settle(gus, s, gus.personalHubId);
    const seen = s.payload().map((e) => e.data.entity_id as string);
    expect(seen.filter((id) => id.startsWith("filler ")).length).toBe(700);
    expect(seen.filter((id) => id.startsWith("live "))).toEqual(live);
    expect(seen.at(-1)).toBe(marker);
    const seqs = s.payload().map((e) => BigInt(e.id!));
    expect(seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]!)).toBe(true);
  });

  it("a replay that caught up hands over the live events that came meanwhile, without reading the table again for them", async () => {
    const kim = await h.user("Kim");
    const from = String((await h.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0);
    await emitEvent(h.db, Array.from({ length: 700 }, (_, i) => ({ type: "memory.updated" as const, hubId: kim.personalHubId, actorId: kim.id, entityId: `filler ${i}` })));
    const watcher = await stream(kim);
    let reads = 0;
    const db = h.database.prisma.$extends({
      query: {
        event: {
          async findMany({ args, query }) {
            reads += 1;
            return query(args);
          },
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    try {
      const s = await openEventStream(kim.key, "", { "last-event-id": from }, { paused: true });
      open.push(s);
      // The first page is queued and the replay waits for the client to read it.
      await new Promise((r) => setTimeout(r, 500));
      const live = Array.from({ length: 10 }, (_, i) => `live ${i}`);
      await emitEvent(h.db, live.map((entityId) => ({ type: "memory.updated" as const, hubId: kim.personalHubId, actorId: kim.id, entityId })));
      await watcher.waitFor((e) => e.data?.entity_id === live.at(-1), 10_000);
      const before = reads;
      s.resume();
      await s.waitFor((e) => e.data?.entity_id === live.at(-1), 10_000);
      // The replay's second (last) page, and no round more for the live events.
      expect(reads - before).toBe(1);
      const seen = s.payload().map((e) => e.data.entity_id as string);
      expect(seen.filter((id) => id.startsWith("filler ")).length).toBe(700);
      expect(seen.filter((id) => id.startsWith("live "))).toEqual(live);
    } finally {
      setDatabase(h.database);
    }
  });

  it("a live event of a hub joined after the replay last read the memberships reaches the stream", async () => {
    const lou = await h.user("Lou");
    const team = await h.teamHub(ann, []);
    await ann.post(`/v1/hubs/${team}/invites`, { email: lou.email });
    const from = String((await h.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0);
    await emitEvent(h.db, Array.from({ length: 700 }, (_, i) => ({ type: "memory.updated" as const, hubId: lou.personalHubId, actorId: lou.id, entityId: `filler ${i}` })));
    let armed = false;
    let pages = 0;
    let note: string | undefined;
    let watcher: SseStream;
    // While the replay reads its last page (its memberships already read, without the team hub), Lou
    // joins the team hub and an event of it goes through the bus (the watcher has it, so this stream was offered it too).
    const db = h.database.prisma.$extends({
      query: {
        event: {
          async findMany({ args, query }) {
            const rows = await query(args);
            if (armed) pages += 1;
            if (armed && pages === 2) {
              expect((await ann.post(`/v1/hubs/${team}/members`, { user_id: lou.id, role: "viewer" })).status).toBe(201);
              note = await push(ann, "lou joined in time for this", team);
              await watcher.waitFor((e) => e.event === "memory.created" && e.data.entity_id === note);
            }
            return rows;
          },
        },
      },
    });
    setDatabase({ ...h.database, prisma: db as unknown as typeof h.database.prisma });
    try {
      // On the same bus as the stream under test (one per database object), its catch-up done first.
      watcher = await stream(lou);
      await settle(lou, watcher, lou.personalHubId);
      armed = true;
      const s = await openEventStream(lou.key, "", { "last-event-id": from });
      open.push(s);
      await vi.waitFor(() => expect(note).toBeDefined(), { timeout: 10_000 });
      await s.waitFor((e) => e.event === "memory.created" && e.data.entity_id === note, 10_000);
      expect(s.payload().filter((e) => e.data.entity_id === note).length).toBe(1);
    } finally {
      setDatabase(h.database);
    }
  });

  it("a resume hands a hub-limited key no event of its user about other hubs, and a member nothing from before they joined", async () => {
    const dana = await h.user("Dana");
    const kept = await h.teamHub(dana, []);
    const doomed = await h.teamHub(dana, []);
    const later = await h.teamHub(ann, []);
    const early = await push(ann, "before dana joined", later);
    expect((await dana.delete(`/v1/hubs/${doomed}`)).status).toBe(200); // hub.deleted, addressed to dana
    await ann.post(`/v1/hubs/${later}/invites`, { email: dana.email });
    expect((await ann.post(`/v1/hubs/${later}/members`, { user_id: dana.id, role: "viewer" })).status).toBe(201);
    const after = await push(ann, "after dana joined", later);
    const limited = (await dana.post("/v1/auth/api-keys", { name: "one hub", hub_ids: [kept] })).body.data.key as string;
    const narrow = await openEventStream(limited, "", { "last-event-id": "0" });
    const wide = await openEventStream(dana.key, "", { "last-event-id": "0" });
    open.push(narrow, wide);
    const marker = await push(dana, "marker for both", kept);
    await narrow.waitFor((e) => e.data?.entity_id === marker);
    await wide.waitFor((e) => e.data?.entity_id === marker);
    // The unrestricted key sees its user's hub.deleted and the hub's events since joining.
    expect(wide.payload().some((e) => e.event === "hub.deleted" && e.data.hub_id === doomed)).toBe(true);
    expect(wide.payload().map((e) => e.data.entity_id)).toContain(after);
    expect(wide.payload().map((e) => e.data.entity_id)).not.toContain(early);
    // The key limited to one hub: nothing of the others, even addressed to its user.
    expect(narrow.payload().filter((e) => e.data.hub_id !== kept && e.data.hub_id !== null)).toEqual([]);
  });

  it("a replay paused by a client that stopped reading hands a member removed meanwhile nothing of the hub", async () => {
    const fay = await h.user("Fay");
    const shared = await h.teamHub(ann, []);
    await ann.post(`/v1/hubs/${shared}/invites`, { email: fay.email });
    expect((await ann.post(`/v1/hubs/${shared}/members`, { user_id: fay.id, role: "viewer" })).status).toBe(201);
    const from = String((await h.db.event.aggregate({ _max: { seq: true } }))._max.seq ?? 0);
    // More than one replay page of the hub's events, more than the stream queues before it waits for the client.
    await emitEvent(h.db, Array.from({ length: 700 }, (_, i) => ({ type: "memory.updated" as const, hubId: shared, actorId: ann.id, entityId: `filler ${i}` })));
    const s = await openEventStream(fay.key, "", { "last-event-id": from }, { paused: true });
    open.push(s);
    // The first page is queued and the replay waits for the client to read it.
    await new Promise((r) => setTimeout(r, 500));
    expect((await ann.delete(`/v1/hubs/${shared}/members/${fay.id}`)).status).toBe(200);
    const secret = await push(ann, "fay must not see this", shared);
    s.resume();
    await settle(fay, s, fay.personalHubId);
    expect(s.payload().map((e) => e.data.entity_id)).not.toContain(secret);
    expect(s.payload().filter((e) => e.data.hub_id === shared).length).toBeLessThanOrEqual(500);
  });

  it("a Last-Event-ID past the newest event (a restored database, a forged id) resumes from the newest, not a dead stream", async () => {
    const before = await push(mira, `before a far resume ${Math.random()}`, mira.personalHubId);
    for (const id of ["9999999999999999999", "9223372036854775807"]) {
      const far = await stream(mira, "", { "last-event-id": id });
      expect(far.status).toBe(200);
      const marker = await push(mira, `after a far resume ${Math.random()}`, mira.personalHubId);
      await far.waitFor((e) => e.event === "memory.created" && e.data.entity_id === marker);
      expect(far.payload().map((e) => e.data.entity_id)).toEqual([marker]);
      expect(far.payload().map((e) => e.data.entity_id)).not.toContain(before);
    }
  });

  it(`at most ${MAX_STREAMS_PER_USER} streams per user at once (429), and closing one frees its place`, async () => {
    const eve = await h.user("Eve");
    const streams = [];
    for (let i = 0; i < MAX_STREAMS_PER_USER; i++) streams.push(await stream(eve));
    expect(streams.every((s) => s.status === 200)).toBe(true);
    const refused = await stream(eve);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text!).error).toMatchObject({ code: "rate_limited", details: { limit: MAX_STREAMS_PER_USER } });
    // Another user is not affected.
    expect((await stream(bob)).status).toBe(200);
    await streams.pop()!.close();
    for (let tries = 0; ; tries++) {
      const again = await stream(eve);
      if (again.status === 200 || tries > 50) {
        expect(again.status).toBe(200);
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const s of streams) await s.close();
  });

  it(`the ${MAX_STREAMS_PER_USER}-stream cap holds when many streams open at once`, async () => {
    const zoe = await h.user("Zoe");
    const opened = await Promise.all(Array.from({ length: MAX_STREAMS_PER_USER + 10 }, () => openEventStream(zoe.key)));
    const live = opened.filter((s) => s.status === 200);
    for (const s of opened) open.push(s);
    expect(opened.filter((s) => s.status === 429).length).toBe(10);
    expect(live.length).toBe(MAX_STREAMS_PER_USER);
    for (const s of live) await s.close();
  });
});

describe("the events prune", () => {
  it("a retention longer than the database's calendar (\"keep them all\") keeps every event, and streams still resume", async () => {
    process.env.ENGRAM_EVENTS_RETENTION_HOURS = "100000000";
    try {
      const first = await stream(mira);
      const marker = await push(mira, `kept for ages ${Math.random()}`, mira.personalHubId);
      const at = await first.waitFor((e) => e.data?.entity_id === marker);
      await first.close();
      // Its cutoff, 11,000 years back, is before year 1: the prune's query failed, every run.
      expect(await pruneEvents(h.database)).toBe(0);
      const resumed = await stream(mira, "", { "last-event-id": String(BigInt(at.id!) - 1n) });
      await resumed.waitFor((e) => e.data?.entity_id === marker);
      expect(resumed.payload().filter((e) => e.event === "error")).toEqual([]);
    } finally {
      delete process.env.ENGRAM_EVENTS_RETENTION_HOURS;
    }
  });

  it("deletes events past their retention in bounded batches and keeps the newer ones", async () => {
    const now = new Date();
    const old = new Date(now.getTime() - eventsRetentionMs() - 60_000);
    const fresh = new Date(now.getTime() - eventsRetentionMs() + 60 * 60_000);
    const make = (n: number, createdAt: Date) =>
      Array.from({ length: n }, () => ({ id: randomUUID(), type: "prune.test", hubId: hub, createdAt }));
    await h.db.event.createMany({ data: [...make(5, old), ...make(2, fresh)] });
    const left = () => h.db.event.groupBy({ by: ["createdAt"], where: { type: "prune.test" }, _count: true });
    // At most two batches of 2000 here: 5 old rows go in one, and the newer ones stay.
    expect(await pruneEvents(h.database, now, 2)).toBeGreaterThanOrEqual(5);
    expect((await left()).map((g) => [g.createdAt.getTime(), g._count])).toEqual([[fresh.getTime(), 2]]);
    // Nothing past retention is left, so another run deletes nothing.
    expect(await pruneEvents(h.database, now)).toBe(0);
  });
});

describe("ready's resumed_after: the id the replay really goes on from", () => {
  const ready = (s: SseStream) => s.events.find((e) => e.event === "ready")!.data as { resumed_after: string | null };
  const newest = async () => (await h.db.event.aggregate({ _max: { seq: true } }))._max.seq!;

  it("no or an unreadable Last-Event-ID: null (the stream starts now)", async () => {
    expect(ready(await stream(mira)).resumed_after).toBeNull();
    expect(ready(await stream(mira, "", { "last-event-id": "not-an-id" })).resumed_after).toBeNull();
  });

  it("an id of another hub's event goes on from it (ids are one sequence), and hands over nothing of that hub", async () => {
    const other = await h.teamHub(bob, []);
    const hidden = await push(bob, `bob's secret ${Math.random()}`, other);
    const at = (await h.db.event.findFirstOrThrow({ where: { entityId: hidden, type: "memory.created" } })).seq;
    const s = await stream(mira, "", { "last-event-id": String(at - 1n) });
    expect(ready(s).resumed_after).toBe(String(at - 1n));
    await settle(mira, s, mira.personalHubId);
    expect(s.payload().map((e) => e.data.entity_id)).not.toContain(hidden);
    expect(s.payload().every((e) => e.data.hub_id !== other)).toBe(true);
  });

  it("an id past the newest event: the newest the caller could have seen (where it resumes, for them), not the id as given nor the server's newest", async () => {
    await push(mira, `before a far resume ${Math.random()}`, mira.personalHubId);
    await push(bob, `another tenant's later write ${Math.random()}`, bob.personalHubId);
    const visible = { OR: [{ hubId: { in: [mira.personalHubId, hub] } }, { userIds: { has: mira.id } }] };
    const seen = (await h.db.event.aggregate({ where: visible, _max: { seq: true } }))._max.seq!;
    const before = await newest();
    expect(before).toBeGreaterThan(seen);
    const s = await stream(mira, "", { "last-event-id": "9999999999999999999" });
    expect(ready(s).resumed_after).toBe(String(seen));
    // Nothing the caller may see lies between that and where the replay goes on from.
    const marker = await settle(mira, s, mira.personalHubId);
    expect(s.payload().map((e) => e.data.entity_id)).toEqual([marker]);
    // A stream that would have shown nothing kept: 0, from which it replays nothing either; not the
    // last id no longer replayable, another count of every tenant's events (as of retention ago).
    await h.db.event.updateMany({ where: { seq: { lte: 2n } }, data: { createdAt: new Date(Date.now() - eventsRetentionMs() - 60_000) } });
    const none = await stream(mira, "?types=transfer.accepted", { "last-event-id": "9999999999999999999" });
    expect(ready(none).resumed_after).toBe("0");
  });

  it("a client of a quiet hub in a busy deployment: its idle stream moves the cursor past what it cannot see, so a reconnect after its last event aged out reports no gap", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const quiet = await stream(mira, `?hub_id=${mira.personalHubId}`);
      const last = await settle(mira, quiet, mira.personalHubId);
      const lastSeen = (await quiet.waitFor((e) => e.data?.entity_id === last)).id!;
      // Other tenants keep writing; bob's own stream proves the bus has dealt with his events.
      const busy = await stream(bob);
      await push(bob, `busy elsewhere ${Math.random()}`, bob.personalHubId);
      const elsewhere = await settle(bob, busy, bob.personalHubId);
      const through = (await h.db.event.findFirstOrThrow({ where: { entityId: elsewhere, type: "memory.created" } })).seq;
      vi.advanceTimersByTime(PING_INTERVAL_MS * (CURSOR_REFRESH_PINGS - 1));
      expect(quiet.events.filter((e) => e.event === "ping" && e.id)).toEqual([]);
      vi.advanceTimersByTime(PING_INTERVAL_MS);
      await quiet.waitFor(() => quiet.events.filter((e) => e.event === "ping").length === CURSOR_REFRESH_PINGS);
      // What EventSource sends back as Last-Event-ID: the last id it read, whatever the event.
      const cursor = [...quiet.events].reverse().find((e) => e.id)!.id!;
      expect(BigInt(cursor)).toBeGreaterThanOrEqual(through);
      expect(quiet.payload().map((e) => e.data.hub_id).every((id) => id === mira.personalHubId || id === null)).toBe(true);
      await quiet.close();
      // Mira's last event ages out; the deployment's newer ones are kept.
      await h.db.event.updateMany({ where: { seq: { lte: BigInt(lastSeen) } }, data: { createdAt: new Date(Date.now() - eventsRetentionMs() - 60_000) } });
      const back = await stream(mira, `?hub_id=${mira.personalHubId}`, { "last-event-id": cursor });
      expect(ready(back).resumed_after).toBe(cursor);
    } finally {
      vi.useRealTimers();
    }
  });

  it("an id older than retention: past what was pruned, so the client can tell it missed events", async () => {
    const first = await stream(mira);
    const seen = await push(mira, `seen before going away ${Math.random()}`, mira.personalHubId);
    const at = await first.waitFor((e) => e.data?.entity_id === seen);
    await first.close();
    const lost = await push(mira, `pruned while away ${Math.random()}`, mira.personalHubId);
    const lostSeq = (await h.db.event.findFirstOrThrow({ where: { entityId: lost, type: "memory.created" } })).seq;
    // The client was away past retention: everything up to `lost` is past it.
    await h.db.event.updateMany({ where: { seq: { lte: lostSeq } }, data: { createdAt: new Date(Date.now() - eventsRetentionMs() - 60_000) } });
    const resumed = await stream(mira, "", { "last-event-id": at.id! });
    expect(BigInt(ready(resumed).resumed_after!)).toBeGreaterThanOrEqual(lostSeq);
    await settle(mira, resumed, mira.personalHubId);
    expect(resumed.payload().map((e) => e.data.entity_id)).not.toContain(lost);
  });
});

describe("a stream after the database was restored under a running server", () => {
  /**
   * A backup taken after one event, two more events the bus handled, then the database put back as the
   * backup was: those rows gone and the id sequence restarting after it. Returns the backup's newest id.
   */
  const restoredAfterBackup = async () => {
    await push(mira, `in the backup ${Math.random()}`, mira.personalHubId);
    const backup = (await h.db.event.aggregate({ _max: { seq: true } }))._max.seq!;
    const old = await stream(mira);
    await settle(mira, old, mira.personalHubId);
    await settle(mira, old, mira.personalHubId);
    await old.close();
    await h.db.event.deleteMany({ where: { seq: { gt: backup } } });
    await h.db.$executeRawUnsafe(`SELECT setval('events_seq_seq', ${backup})`);
    return backup;
  };

  it("an idle ping moves the cursor to where the bus is now, not to the highest id it ever handled, so the stream goes on delivering", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      // The restore: the rows written after the backup are gone, and the ids start again after it.
      await restoredAfterBackup();
      const s = await stream(mira);
      await settle(mira, s, mira.personalHubId);
      vi.advanceTimersByTime(PING_INTERVAL_MS * CURSOR_REFRESH_PINGS);
      await s.waitFor(() => s.events.filter((e) => e.event === "ping").length === CURSOR_REFRESH_PINGS);
      const after = await settle(mira, s, mira.personalHubId);
      expect(s.payload().map((e) => e.data.entity_id)).toContain(after);
    } finally {
      vi.useRealTimers();
    }
  });

  it("a stream opened after the restore in a quiet deployment pings no id from the lost history, and delivers the next event", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      // Restored in place: the LISTEN connection stays, and nothing happens before the next ping.
      const backup = await restoredAfterBackup();
      const s = await stream(mira);
      vi.advanceTimersByTime(PING_INTERVAL_MS * CURSOR_REFRESH_PINGS);
      await s.waitFor(() => s.events.filter((e) => e.event === "ping").length === CURSOR_REFRESH_PINGS);
      for (const ping of s.events.filter((e) => e.event === "ping" && e.id)) expect(BigInt(ping.id!)).toBeLessThanOrEqual(backup);
      const after = await settle(mira, s, mira.personalHubId);
      expect(s.payload().map((e) => e.data.entity_id)).toContain(after);
    } finally {
      vi.useRealTimers();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as chatStream } from "@/app/v1/chat/sessions/[id]/messages/[messageId]/stream/route.ts";
import { GET as eventsStream } from "@/app/v1/events/stream/route.ts";
import { MAX_CHAT_STREAMS_PER_USER } from "@/lib/chat/stream-chat-message.ts";
import { MAX_STREAMS_PER_USER } from "@/lib/events/stream-events.ts";
import { newId } from "@/lib/ids.ts";
import { call, createHarness, type Client, type Harness } from "./support/harness.ts";

// HEAD is Next's GET without the body; asking whether a memory is there is not reading it, so it
// must not count as an access (access_count, last_accessed feed "relevant" order and the dreams).

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

describe("HEAD /v1/memories/:id", () => {
  it("answers like GET without counting an access", async () => {
    const id = (await ann.post("/v1/memories", { content: "Heads or tails" })).body.data.id as string;
    const head = await call("HEAD", `/v1/memories/${id}`, undefined, { headers: { authorization: `Bearer ${ann.key}` } });
    expect(head.status).toBe(200);
    const stored = await h.db.memory.findUniqueOrThrow({ where: { id } });
    expect([stored.accessCount, stored.lastAccessedAt]).toEqual([0, null]);
    const missing = await call("HEAD", `/v1/memories/${"0".repeat(8)}-0000-7000-8000-${"0".repeat(12)}`, undefined, { headers: { authorization: `Bearer ${ann.key}` } });
    expect(missing.status).toBe(404);
    // A GET still counts.
    expect((await ann.get(`/v1/memories/${id}`)).status).toBe(200);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id } })).accessCount).toBe(1);
  });
});

describe("HEAD on the other GET routes that write", () => {
  // Next runs GET for HEAD: the notification list, its summary and the onboarding state brought the
  // caller's checklist up to date (a write, and a self-resolving checklist) for a request that reads nothing.
  it("does not refresh the onboarding checklist; a GET still does", async () => {
    const bob = await h.user("Bob");
    expect((await bob.post("/v1/onboarding/restart", {})).status).toBe(201);
    await bob.post("/v1/memories", { content: "A first memory, which ticks an item off at the next refresh." });
    const stored = async () => JSON.stringify((await h.db.notification.findFirstOrThrow({ where: { userId: bob.id, kind: "checklist" } })).payload);
    const before = await stored();
    for (const path of ["/v1/notifications", "/v1/notifications/summary", "/v1/onboarding/state"]) {
      const head = await call("HEAD", path, undefined, { headers: { authorization: `Bearer ${bob.key}` } });
      expect(head.status, path).toBe(200);
      expect(await stored(), path).toBe(before);
    }
    expect((await bob.get("/v1/onboarding/state")).status).toBe(200);
    expect(await stored()).not.toBe(before);
  });
});

describe("HEAD on the streams", () => {
  // A HEAD on a stream opened it as GET does: it took one of the user's places (20 of each kind) and
  // followed the log, a body no one reads, until the connection's 15 minutes ran out. Twenty of them
  // refused every real stream of the user with 429.
  it("answers the stream's headers without taking a place or following anything", async () => {
    const cyd = await h.user("Cyd");
    const auth = { authorization: `Bearer ${cyd.key}` };
    const session = (await cyd.post("/v1/chat/sessions", { scope_type: "user_all_hubs" })).body.data.id as string;
    const question = await h.db.chatMessage.create({ data: { id: newId(), sessionId: session, sequence: 1, role: "user", authorUserId: cyd.id, status: "completed", content: "Anything?" } });
    // A turn still running (no worker here), so a stream of it stays open.
    const turn = await h.db.chatMessage.create({ data: { id: newId(), sessionId: session, sequence: 2, role: "assistant", authorUserId: cyd.id, status: "running", parentMessageId: question.id } });
    const chatPath = `http://engram.test/v1/chat/sessions/${session}/messages/${turn.id}/stream`;
    const open = (method: string, kind: "chat" | "events") =>
      kind === "chat"
        ? chatStream(new Request(chatPath, { method, headers: auth }), { params: Promise.resolve({ id: session, messageId: turn.id }) })
        : eventsStream(new Request("http://engram.test/v1/events/stream", { method, headers: auth }), { params: Promise.resolve({}) });
    const held: Response[] = [];
    try {
      for (const [kind, cap] of [["chat", MAX_CHAT_STREAMS_PER_USER], ["events", MAX_STREAMS_PER_USER]] as const) {
        for (let i = 0; i < cap + 1; i++) {
          const head = await open("HEAD", kind);
          held.push(head);
          expect(head.status, kind).toBe(200);
          expect(head.headers.get("content-type"), kind).toMatch(/text\/event-stream/);
          expect(head.body, kind).toBeNull();
        }
        const get = await open("GET", kind);
        held.push(get);
        expect(get.status, kind).toBe(200);
      }
      // What GET refuses, HEAD refuses too.
      const missing = await chatStream(new Request(chatPath.replace(turn.id, newId()), { method: "HEAD", headers: auth }), { params: Promise.resolve({ id: session, messageId: newId() }) });
      expect(missing.status).toBe(404);
    } finally {
      for (const res of held) await res.body?.cancel().catch(() => undefined);
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { MemoryRateLimiter, setRateLimiter, type RateLimiter } from "@/lib/api/rate-limit.ts";
import { createHarness, frozenLimiter, HARNESS_LIMITS, type Client, type Harness } from "./support/harness.ts";

// JSON-RPC 2.0 (§6) answers a batch with an array, whatever the number of requests in it. The SDK's
// JSON transport answered a batch holding one request with that response alone, an object a client
// matching the answer to its batch could not read.

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});

afterAll(async () => {
  await h.close();
});

async function post(body: unknown) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: {
      authorization: `Bearer ${ann.key}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
    },
    body: JSON.stringify(body),
  });
  const res = await mcpPost(req, { params: Promise.resolve({}) });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), limit: res.headers.get("x-ratelimit-limit"), body: (text ? JSON.parse(text) : undefined) as any };
}

const recall = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } });
const hubsCall = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_hubs", arguments: {} } });

describe("a JSON-RPC batch", () => {
  it("holding one request is answered with an array of one response", async () => {
    const res = await post([hubsCall(7)]);
    expect(res.status).toBe(200);
    expect(res.type).toContain("application/json");
    expect(Array.isArray(res.body)).toBe(true);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toMatchObject({ jsonrpc: "2.0", id: 7, result: { structuredContent: { hubs: expect.any(Array) } } });
    // The rate-limit headers stay on the rewrapped answer.
    expect(res.limit).not.toBeNull();
  });

  it("holding one request and a notification is answered with an array of the one response", async () => {
    const res = await post([hubsCall(8), { jsonrpc: "2.0", method: "notifications/initialized" }]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([expect.objectContaining({ id: 8 })]);
  });

  it("holding two requests is answered with both, and a single request (no batch) with an object", async () => {
    const both = await post([hubsCall(9), hubsCall(10)]);
    expect(both.body.map((r: { id: number }) => r.id).sort((a: number, b: number) => a - b)).toEqual([9, 10]);
    const single = await post(hubsCall(11));
    expect(Array.isArray(single.body)).toBe(false);
    expect(single.body).toMatchObject({ id: 11 });
  });
});

// JSON-RPC 2.0 (§6) answers each invalid entry of a batch with its own Invalid Request error (id null)
// in the array, and the valid entries as usual: the SDK answered the whole batch with one 400 object,
// neither an array nor an answer to its valid requests.
describe("a JSON-RPC batch with an invalid entry", () => {
  const invalid = { jsonrpc: "2.0", id: null, error: expect.objectContaining({ code: -32600 }) };

  it("holding only invalid entries is answered with an array of one Invalid Request error per entry", async () => {
    const res = await post([null]);
    expect(res.status).toBe(400);
    expect(res.body).toEqual([invalid]);
    expect((await post([1, { foo: 1 }])).body).toEqual([invalid, invalid]);
  });

  it("runs its valid requests and answers each entry", async () => {
    const res = await post([1, hubsCall(2)]);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(2);
    expect(res.body).toContainEqual(invalid);
    expect(res.body).toContainEqual(expect.objectContaining({ id: 2, result: expect.objectContaining({ structuredContent: { hubs: expect.any(Array) } }) }));
    // A notification has no answer: the invalid entry's alone.
    const notified = await post([{ jsonrpc: "2.0", method: "notifications/initialized" }, "x"]);
    expect(notified.body).toEqual([invalid]);
  });
});

describe("a JSON-RPC batch over what is left of the rate limit", () => {
  // Refused whole, it ran none of its calls; spending the tokens of the calls that fitted left the client
  // with nothing for a minute, the smaller batch it would retry with refused too.
  it("is refused without spending any of it", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 5, heavy: 3, light: 1_000 }, () => frozen));
    try {
      // One heavy token spent first: a batch over the whole cap is refused as one that can never pass (below).
      expect((await post([0].map(recall))).status).toBe(200);
      const refused = await post([1, 2, 3].map(recall));
      expect(refused.status).toBe(429);
      expect(refused.body.map((r: { id: number }) => r.id)).toEqual([1, 2, 3]);
      // The 2 heavy tokens left are all still there.
      const fits = await post([5, 6].map(recall));
      expect(fits.status).toBe(200);
      expect(fits.body).toHaveLength(2);
      expect((await post([8].map(recall))).status).toBe(429);

      expect((await post([10].map(hubsCall))).status).toBe(200);
      const tooMany = await post([11, 12, 13, 14, 15].map(hubsCall));
      expect(tooMany.status).toBe(429);
      expect((await post([21, 22, 23, 24].map(hubsCall))).status).toBe(200);
      expect((await post(hubsCall(26))).status).toBe(429);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });

  // The up-front check skipped a bucket the batch needed one token from, and the charging loop took
  // tokens in message order: [push, push, list, recall] with the heavy bucket empty spent three regular
  // tokens, then refused the whole batch for its recall, nothing run.
  it("mixing buckets is checked in every bucket before any is charged", async () => {
    setRateLimiter(frozenLimiter({ regular: 5, heavy: 1, light: 1_000 }));
    try {
      expect((await post([recall(1)])).status).toBe(200);
      const before = await h.db.memory.count();
      const push = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_push", arguments: { content: `never saved ${id}` } } });
      const list = (id: number) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "engram_list", arguments: {} } });
      const mixed = await post([push(2), push(3), list(4), recall(5)]);
      expect(mixed.status).toBe(429);
      expect(mixed.body.map((r: { id: number }) => r.id)).toEqual([2, 3, 4, 5]);
      expect(await h.db.memory.count()).toBe(before);
      // All 5 regular tokens are still there.
      expect((await post([31, 32, 33, 34, 35].map(hubsCall))).status).toBe(200);
      expect((await post(hubsCall(36))).status).toBe(429);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });

  // More calls than the bucket's whole cap can never pass: a 429 with Retry-After had the client retry forever.
  it("needing more than a bucket's cap is refused as invalid, naming the limit, and spends nothing", async () => {
    setRateLimiter(frozenLimiter({ regular: 5, heavy: 3, light: 1_000 }));
    try {
      const refused = await post([1, 2, 3, 4].map(recall));
      expect(refused.status).toBe(400);
      expect(refused.body.map((r: { id: number }) => r.id)).toEqual([1, 2, 3, 4]);
      expect(refused.body[0].error).toMatchObject({ code: -32600, data: { code: "invalid_request", limit: 3 } });
      expect(refused.body[0].error.message).toMatch(/3/);
      const regular = await post([11, 12, 13, 14, 15, 16].map(hubsCall));
      expect(regular.status).toBe(400);
      expect(regular.body[0].error.data).toMatchObject({ code: "invalid_request", limit: 5 });
      // Nothing was spent: the whole caps are still there.
      expect((await post([5, 6, 7].map(recall))).status).toBe(200);
      expect((await post([21, 22, 23, 24, 25].map(hubsCall))).status).toBe(200);
      // With the regular bucket empty too, what can never pass is still said as such, not as a wait.
      const mixed = await post([hubsCall(31), ...[32, 33, 34, 35].map(recall)]);
      expect(mixed.status).toBe(400);
      expect(mixed.body[0].error.data).toMatchObject({ code: "invalid_request", limit: 3 });
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });
});

describe("a tools/call notification (no id)", () => {
  // JSON-RPC never answers a notification and the SDK runs no tool for one: charged as the call it names,
  // a recall sent as a notification spent a heavy token on nothing.
  it("runs nothing and spends no token of the call it names", async () => {
    const frozen = Date.now();
    setRateLimiter(new MemoryRateLimiter({ regular: 1_000, heavy: 1, light: 1_000 }, () => frozen));
    try {
      const before = await h.db.memory.count();
      const notified = await post({ jsonrpc: "2.0", method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } });
      expect(notified.status).toBe(202);
      const pushNotified = await post({ jsonrpc: "2.0", method: "tools/call", params: { name: "engram_push", arguments: { content: "never saved" } } });
      expect(pushNotified.status).toBe(202);
      expect(await h.db.memory.count()).toBe(before);
      const recalled = await post({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_recall", arguments: { query: "anything" } } });
      expect(recalled.status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });
});

// An error past reading the body (here the rate limiter's store failing on the charge) was answered with
// id null whatever the request, and with a body even for a notification, which JSON-RPC never answers.
describe("an error once the body is read", () => {
  const failing: RateLimiter = {
    peek: async () => ({ success: true, limit: 10, remaining: 10, reset: Date.now() + 60_000, retryAfterMs: 0 }),
    limit: async () => {
      throw new Error("limiter store failed");
    },
  };

  it("answers with the request's id, each request of a batch, and a notification with no body", async () => {
    setRateLimiter(failing);
    try {
      const single = await post(hubsCall(41));
      expect(single.status).toBe(500);
      expect(single.body).toMatchObject({ jsonrpc: "2.0", id: 41, error: { code: -32603, data: { code: "internal" } } });
      expect(JSON.stringify(single.body)).not.toContain("limiter store failed");
      const batch = await post([hubsCall(42), hubsCall(43)]);
      expect(batch.status).toBe(500);
      expect(batch.body.map((r: { id: number }) => r.id)).toEqual([42, 43]);
      const notified = await post({ jsonrpc: "2.0", method: "notifications/initialized" });
      expect(notified.status).toBe(500);
      expect(notified.body).toBeUndefined();
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });
});

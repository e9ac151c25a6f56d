import { describe, expect, it } from "vitest";
import { FULL_ACCESS, type AuthContext } from "@/lib/api/context.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { setDatabase } from "@/lib/db/database.ts";
import { MAX_READ_CHARS } from "@/lib/mcp/mcp-tools.ts";
import { MAX_RESULT_CHARS_PER_REQUEST } from "@/lib/mcp/serve-mcp.ts";
import { pageCharsAtMost } from "@/lib/memories/get-memory.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { frozenLimiter, HARNESS_LIMITS, type Client } from "./support/harness.ts";
import { openMcpToolCalls, postMcp } from "./support/mcp-tool-calls.ts";

// A JSON-RPC batch of 100 engram_get calls was answered with 100 pages of 100,000 characters each, their
// text twice (content and structuredContent): one response of tens of MB. A request's read-only results
// share one budget now; calls past it answer a tool error saying to call again on their own.

const mcp = openMcpToolCalls("/mcp");

async function batch(calls: { name: string; arguments: Record<string, unknown> }[]) {
  const req = new Request("http://engram.test/mcp", {
    method: "POST",
    headers: { authorization: `Bearer ${mcp.ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify(calls.map((params, i) => ({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params }))),
  });
  const res = await postMcp("/mcp", req);
  const text = await res.text();
  return { status: res.status, size: text.length, answers: JSON.parse(text) as any[] };
}

describe("a batch's tool results", () => {
  it("are bounded in all: reads past the budget are told to call again on their own, the first read is whole", async () => {
    const content = `# Long\n\n${"word ".repeat(60_000)}`;
    const memory = (await mcp.ann.post("/v1/memories", { content, title: "Long" })).body.data;
    const res = await batch(Array.from({ length: 100 }, () => ({ name: "engram_get", arguments: { id: memory.id } })));
    expect(res.status).toBe(200);
    expect(res.answers).toHaveLength(100);
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST + 100 * 1000);
    const served = res.answers.filter((a) => !a.result.isError);
    const refused = res.answers.filter((a) => a.result.isError);
    expect(served.length).toBeGreaterThanOrEqual(1);
    for (const answer of served) expect([...answer.result.structuredContent.memory.content]).toHaveLength(MAX_READ_CHARS);
    expect(refused.length).toBeGreaterThan(0);
    for (const answer of refused) {
      expect(answer.result.structuredContent.error).toMatchObject({ code: "invalid_request", details: { max_result_chars: MAX_RESULT_CHARS_PER_REQUEST } });
      expect(answer.result.content[0].text).toContain("call engram_get again in a request of its own");
    }
    // Each call is answered on its own as before.
    const single = await mcp.call("engram_get", { id: memory.id });
    expect(single.result.isError).toBeFalsy();
    expect(single.result.structuredContent.memory.content).toHaveLength(MAX_READ_CHARS);
  }, 120_000);

  it("refuse a read before it runs: one refused for the budget counts no access (the agent's retry counts it once)", async () => {
    const content = `# Counted\n\n${"word ".repeat(60_000)}`;
    const memory = (await mcp.ann.post("/v1/memories", { content, title: "Counted" })).body.data;
    const res = await batch(Array.from({ length: 40 }, () => ({ name: "engram_get", arguments: { id: memory.id } })));
    const served = res.answers.filter((a) => !a.result.isError).length;
    expect(served).toBeGreaterThanOrEqual(1);
    expect(served).toBeLessThan(40);
    await flushAccess();
    expect((await mcp.h.db.memory.findUniqueOrThrow({ where: { id: memory.id } })).accessCount).toBe(served);
    // Every read that ran was answered whole.
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST + 100 * 1000);
  }, 120_000);

  it("count only reads: a batch's write results take nothing of the reads' budget", async () => {
    const content = `# Long\n\n${"word ".repeat(60_000)}`;
    const memory = (await mcp.ann.post("/v1/memories", { content, title: "After writes" })).body.data;
    const single = await batch([{ name: "engram_get", arguments: { id: memory.id } }]);
    // Reads that leave less than one more page of the budget, then writes whose results together hold
    // more than that, then one more read: the writes' results must not make it refused.
    const reads = Math.floor(MAX_RESULT_CHARS_PER_REQUEST / single.size) - 1;
    const projectContext = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`key-${i}`, "v".repeat(1000)]));
    const push = (i: number) => ({ name: "engram_push", arguments: { content: `Note ${i} ${Math.random()}`, project_context: projectContext } });
    const pushed = await batch([push(-1)]);
    const pushes = Array.from({ length: Math.ceil(single.size / pushed.size) + 1 }, (_, i) => push(i));
    const calls = [...Array.from({ length: reads }, () => ({ name: "engram_get", arguments: { id: memory.id } })), ...pushes, { name: "engram_get", arguments: { id: memory.id } }];
    const res = await batch(calls);
    for (const answer of res.answers) expect(answer.result.isError, JSON.stringify(answer.result.structuredContent?.error)).toBeFalsy();
  }, 120_000);

  it("never refuse a write: a batch's pushes are all made and answered", async () => {
    const content = `# Long\n\n${"word ".repeat(60_000)}`;
    const memory = (await mcp.ann.post("/v1/memories", { content, title: "Long again" })).body.data;
    const calls = Array.from({ length: 30 }, (_, i) => (i % 2 ? { name: "engram_push", arguments: { content: `Note ${i}` } } : { name: "engram_get", arguments: { id: memory.id } }));
    const res = await batch(calls);
    const pushes = res.answers.filter((_, i) => i % 2);
    expect(pushes).toHaveLength(15);
    for (const push of pushes) expect(push.result.isError, JSON.stringify(push.result.structuredContent)).toBeFalsy();
  }, 120_000);
});

// A read refused for the budget runs nothing, yet kept the token its call was charged: an engram_ask at
// the end of a batch of long reads spent one of the few heavy tokens a minute (an ask is a model call)
// for an answer that said to call it again, and the retry paid a second one. Every refused read gave its
// token back then, one limiter write each: a batch of one long read and 99 more cost about one token
// (a rate limit undone) and ~200 writes on one counter row. Only the heavy tokens are given back now,
// together, once per request; a refused get keeps its regular token, as any answered call does.
describe("a read refused for the budget", () => {
  it("gives back the heavy token of an ask, in one refund per request; a get's regular token stays paid", async () => {
    const limiter = frozenLimiter({ regular: 1_000, heavy: 3, light: 100 });
    let refunds = 0;
    const refund = limiter.refund.bind(limiter);
    limiter.refund = (...args) => {
      refunds += 1;
      return refund(...args);
    };
    setRateLimiter(limiter);
    try {
      const content = `# Long read\n\n${"word ".repeat(60_000)}`;
      const memory = (await mcp.ann.post("/v1/memories", { content, title: "Long read" })).body.data;
      const gets = Array.from({ length: 30 }, () => ({ name: "engram_get", arguments: { id: memory.id } }));
      const asks = Array.from({ length: 3 }, () => ({ name: "engram_ask", arguments: { query: "What is in the long read?" } }));
      const regularBefore = (await limiter.peek("regular", mcp.ann.id)).remaining;
      const res = await batch([...gets, ...asks]);
      expect(res.status).toBe(200);
      for (const asked of res.answers.slice(30)) expect(asked.result.structuredContent.error).toMatchObject({ code: "invalid_request", details: { max_result_chars: MAX_RESULT_CHARS_PER_REQUEST } });
      expect(res.answers.slice(0, 30).filter((a) => !a.result.isError).length).toBeLessThan(30);
      // Every get is paid for, answered or not; the asks' heavy tokens all come back, in one refund.
      expect((await limiter.peek("regular", mcp.ann.id)).remaining).toBe(regularBefore - 30);
      expect((await limiter.peek("heavy", mcp.ann.id)).remaining).toBe(3);
      expect(refunds).toBe(1);
      // The retry the refusal asks for is not refused by the rate limit.
      const retried = await mcp.call("engram_ask", { query: "What is in the long read?" });
      expect(retried.error).toBeUndefined();
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  }, 120_000);
});

// The budget let every read start while none had answered (nothing to measure by yet): the first four
// reads of a batch ran at once, whatever their size. Four pages of text that JSON escapes six times over
// (control characters) were one response of about 4.8 million characters against a budget of 2 million.
describe("the first reads of a batch", () => {
  it("wait for one to answer before the budget lets more start", async () => {
    const content = `# Escaped\n\n${"\u0001".repeat(120_000)}`;
    const pushed = await mcp.ann.post("/v1/memories", { content, title: "Escaped" });
    expect(pushed.status, pushed.text).toBe(201);
    const single = await batch([{ name: "engram_get", arguments: { id: pushed.body.data.id } }]);
    expect(single.size).toBeGreaterThan(MAX_RESULT_CHARS_PER_REQUEST / 2);
    const res = await batch(Array.from({ length: 4 }, () => ({ name: "engram_get", arguments: { id: pushed.body.data.id } })));
    expect(res.answers.filter((a) => !a.result.isError)).toHaveLength(1);
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST);
  }, 120_000);
});

// The wait above held reads only while none had answered: once a small read had (engram_hubs, a few
// hundred characters), the next ones were judged by that size and four page reads started together,
// again about 4.8 million characters. A page read not yet answered now counts at what its page can
// take in JSON, and reads run together only while those bounds fit the budget.
describe("reads after a small one has answered", () => {
  it("are still judged at their page's worst case: the escaped pages do not run together", async () => {
    const content = `# Escaped again\n\n${"\u0001".repeat(120_000)}`;
    const pushed = await mcp.ann.post("/v1/memories", { content, title: "Escaped again" });
    expect(pushed.status, pushed.text).toBe(201);
    const get = { name: "engram_get", arguments: { id: pushed.body.data.id } };
    const res = await batch([{ name: "engram_hubs", arguments: {} }, get, get, get, get]);
    expect(res.answers[0].result.isError).toBeFalsy();
    expect(res.answers.slice(1).filter((a) => !a.result.isError)).toHaveLength(1);
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST);
  }, 120_000);

  it("are bounded by a look at the page's size only where another read may run beside them, not for a single call", async () => {
    const pushed = await mcp.ann.post("/v1/memories", { content: "# Short\n\nA short note.", title: "Short" });
    const bounds: string[] = [];
    const { sql } = mcp.h.database;
    const counting: typeof sql = {
      exec: (text) => sql.exec(text),
      query: (text, params) => {
        if (text.includes("octet_length")) bounds.push(text);
        return sql.query(text, params);
      },
    };
    setDatabase({ ...mcp.h.database, sql: counting });
    try {
      const get = { name: "engram_get", arguments: { id: pushed.body.data.id } };
      expect((await batch([get])).answers[0].result.isError).toBeFalsy();
      expect(bounds).toHaveLength(0);
      const res = await batch([{ name: "engram_hubs", arguments: {} }, get]);
      for (const answer of res.answers) expect(answer.result.isError).toBeFalsy();
      expect(bounds).toHaveLength(1);
    } finally {
      setDatabase(mcp.h.database);
    }
  }, 120_000);
});

// A batch is checked against what is left before it is charged, but concurrent batches can pass the
// check together: the one whose charge then ran out was refused whole (429, nothing run) yet kept the
// tokens its earlier calls had taken, so its retry paid for them twice. They are given back now.
describe("batches charged at once", () => {
  it("pay only for the calls they run: a batch refused partway through its charges keeps none of them", async () => {
    const limiter = frozenLimiter({ regular: 12, heavy: 5, light: 1_000 });
    setRateLimiter(limiter);
    try {
      const hubs = Array.from({ length: 5 }, () => ({ name: "engram_hubs", arguments: {} }));
      const results = await Promise.all(Array.from({ length: 6 }, () => batch(hubs)));
      const ran = results.filter((r) => r.status === 200).reduce((n, r) => n + r.answers.filter((a: any) => a.result).length, 0);
      expect(results.some((r) => r.status === 429)).toBe(true);
      expect(12 - (await limiter.peek("regular", mcp.ann.id)).remaining).toBe(ran);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  }, 120_000);
});

// The look at a page's size before a read (pageCharsAtMost) read any memory by id, with no membership
// or API-key allowlist: how long a batch's reads waited told a caller the size of a memory in a hub
// they cannot read. A memory out of the caller's reach bounds nothing now, as one not there.
describe("the look at a page's size", () => {
  const caller = (user: Client, hubIds: string[] | null = null): AuthContext => ({
    db: mcp.h.database.prisma,
    sql: mcp.h.database.sql,
    dbKind: mcp.h.database.kind,
    requestId: "test",
    now: () => new Date(),
    user: { id: user.id, email: user.email, name: user.name },
    credential: { type: "api_key", ...FULL_ACCESS, hubIds },
  });

  it("sees only memories the caller may read: another tenant's, or one outside a key's hubs, bounds at 0", async () => {
    const memory = (await mcp.ann.post("/v1/memories", { content: `# Sized\n\n${"x".repeat(5_000)}`, title: "Sized" })).body.data;
    const bob = await mcp.h.user("Bob");
    const other = await mcp.h.teamHub(mcp.ann);
    const page = { offset: 0, chars: MAX_READ_CHARS };
    expect(await pageCharsAtMost(caller(mcp.ann), memory.id, page)).toBeGreaterThanOrEqual(5_000);
    expect(await pageCharsAtMost(caller(mcp.ann, [mcp.ann.personalHubId]), memory.id, page)).toBeGreaterThanOrEqual(5_000);
    expect(await pageCharsAtMost(caller(bob), memory.id, page)).toBe(0);
    expect(await pageCharsAtMost(caller(mcp.ann, [other]), memory.id, page)).toBe(0);
  }, 120_000);
});

// A page read not yet answered was counted at its text's worst case and 100,000 characters for the
// memory's other fields, but project_context alone can hold 32 keys of 100 and values of 1,000, each
// escaped to six in JSON (about 211,000), and tags and the title come twice: three reads of ~40,000
// control characters with such fields were bounded at 580,000 each, ran together, and answered about
// 730,000 each, 2.2 million against the budget of 2 million. The allowance is now derived from the limits.
describe("a page read's bound", () => {
  it("counts the memory's other fields at their limits: three reads with full fields never run past the budget together", async () => {
    const c = "\u0001";
    const projectContext = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`${i}`.padStart(100, c), c.repeat(1000)]));
    const tags = Array.from({ length: 50 }, (_, i) => `${i}`.padStart(64, c));
    const pushed = await mcp.ann.post("/v1/memories", {
      content: `# Fields\n\n${c.repeat(40_000)}`,
      title: "Fields",
      tags,
      project_context: projectContext,
      hint: c.repeat(2000),
      hub_reason: c.repeat(2000),
    });
    expect(pushed.status, pushed.text).toBe(201);
    const get = { name: "engram_get", arguments: { id: pushed.body.data.id } };
    const single = await batch([get]);
    expect(single.answers[0].result.isError).toBeFalsy();
    // Three of them are past the budget: they must not all run and be answered.
    expect(3 * single.size).toBeGreaterThan(MAX_RESULT_CHARS_PER_REQUEST);
    const res = await batch([{ name: "engram_hubs", arguments: {} }, get, get, get]);
    expect(res.answers[0].result.isError).toBeFalsy();
    expect(res.answers.slice(1).filter((a) => !a.result.isError).length).toBeLessThan(3);
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST);
  }, 120_000);
});

// A batch's charges are made one by one, so the minute can turn between them; the charges kept only
// the last one's window per bucket, and every refund went to that newer window: it gave the new minute
// tokens it had never been charged, and left the older minute's calls counted. Each window's calls now
// go back to the window that charged them.
describe("a batch charged across the minute's turn", () => {
  const W0 = Date.parse("2026-01-01T00:00:00Z");
  const W1 = W0 + 60_000;

  /** A limiter whose clock stands at `t.now`, and whose `after(n)` runs after its n-th charge (1-based). */
  function turningLimiter(caps: { regular: number; heavy: number; light: number }, after: (charge: number, bucket: string) => Promise<void> | void) {
    const t = { now: W0 + 59_000 };
    const limiter = new MemoryRateLimiter(caps, () => t.now);
    const limit = limiter.limit.bind(limiter);
    let charges = 0;
    limiter.limit = async (bucket, identity) => {
      const result = await limit(bucket, identity);
      await after(++charges, bucket);
      return result;
    };
    return { t, limiter, limit };
  }

  it("refused partway, gives each window back the calls it charged", async () => {
    const { t, limiter, limit } = turningLimiter({ regular: 10, heavy: 5, light: 1_000 }, async (charge) => {
      // The minute turns after the first call's charge; after the second a concurrent request takes what is left.
      if (charge === 1) t.now = W1;
      if (charge === 2) while ((await limit("regular", mcp.ann.id)).success);
    });
    setRateLimiter(limiter);
    try {
      const res = await batch(Array.from({ length: 3 }, () => ({ name: "engram_hubs", arguments: {} })));
      expect(res.status).toBe(429);
      // The older minute's call is given back to it, the newer's to it: the concurrent request's 8 stay
      // counted. Both given back to the newer minute, it counted 7, and 3 were left half a minute on.
      t.now = W1 + 30_000;
      expect((await limiter.peek("regular", mcp.ann.id)).remaining).toBe(2);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  }, 120_000);

  it("gives refused asks' heavy tokens back to the minutes that charged them", async () => {
    const { t, limiter } = turningLimiter({ regular: 1_000, heavy: 3, light: 100 }, (_, bucket) => {
      // The minute turns after the first ask's charge: one heavy call in the older minute, two in the newer.
      if (bucket === "heavy" && t.now < W1) t.now = W1;
    });
    setRateLimiter(limiter);
    try {
      const content = `# Long read across minutes\n\n${"word ".repeat(60_000)}`;
      const memory = (await mcp.ann.post("/v1/memories", { content, title: "Long read across minutes" })).body.data;
      const gets = Array.from({ length: 30 }, () => ({ name: "engram_get", arguments: { id: memory.id } }));
      const asks = Array.from({ length: 3 }, () => ({ name: "engram_ask", arguments: { query: "What is in the long read?" } }));
      const res = await batch([...gets, ...asks]);
      expect(res.status).toBe(200);
      for (const asked of res.answers.slice(30)) expect(asked.result.structuredContent.error).toMatchObject({ code: "invalid_request" });
      // All three back: the older minute's one there (it still weighs whole at the turn), the newer's two here.
      expect((await limiter.peek("heavy", mcp.ann.id)).remaining).toBe(3);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  }, 120_000);
});

// engram_list had no bound of its own: a list not yet answered was counted at the largest result so far,
// so after a small read (engram_hubs) three lists of memories with full project_context (about 211,000
// characters each escaped) ran together and answered past the budget. A list page counts now at what
// its page size of memories can take, as a page read does.
describe("a list's bound", () => {
  it("counts each memory of its page at its fields' limits: lists that cannot fit together do not run together", async () => {
    const c = "\u0001";
    const projectContext = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`${i}`.padStart(100, c), c.repeat(1000)]));
    for (let i = 0; i < 4; i++) {
      const pushed = await mcp.ann.post("/v1/memories", { content: `Listed ${i}`, title: `Listed ${i}`, project_context: projectContext });
      expect(pushed.status, pushed.text).toBe(201);
    }
    const list = { name: "engram_list", arguments: { limit: 4 } };
    const single = await batch([list]);
    expect(single.answers[0].result.isError).toBeFalsy();
    expect(3 * single.size).toBeGreaterThan(MAX_RESULT_CHARS_PER_REQUEST);
    const res = await batch([{ name: "engram_hubs", arguments: {} }, list, list, list]);
    expect(res.answers[0].result.isError).toBeFalsy();
    expect(res.answers.slice(1).filter((a) => !a.result.isError).length).toBeLessThan(3);
    expect(res.size).toBeLessThan(MAX_RESULT_CHARS_PER_REQUEST);
  }, 120_000);
});

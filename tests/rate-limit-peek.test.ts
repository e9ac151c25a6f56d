import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryRateLimiter, type RateLimiter } from "@/lib/api/rate-limit.ts";
import { PostgresRateLimiter } from "@/lib/api/postgres-rate-limit.ts";
import { createHarness, type Harness } from "./support/harness.ts";

// MCP checks the regular bucket before reading a body (lib/mcp/serve-mcp.ts): the check must say
// what the next call would get, and spend nothing.

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

const frozen = Date.parse("2026-01-01T00:00:30Z");
const caps = { regular: 2, heavy: 1, light: 1 };

describe.each([
  ["memory", () => new MemoryRateLimiter(caps, () => frozen)],
  ["postgres", () => new PostgresRateLimiter(caps, async () => h.database.sql, () => frozen)],
] as [string, () => RateLimiter][])("the %s limiter's peek", (_name, make) => {
  it("answers whether a call would pass, without counting one", async () => {
    const limiter = make();
    const identity = `peek-${_name}-${Date.now()}`;
    for (let i = 0; i < 5; i++) expect(await limiter.peek("regular", identity)).toMatchObject({ success: true, limit: 2, remaining: 2 });
    expect((await limiter.limit("regular", identity)).success).toBe(true);
    expect(await limiter.peek("regular", identity)).toMatchObject({ success: true, remaining: 1 });
    expect((await limiter.limit("regular", identity)).success).toBe(true);
    const spent = await limiter.peek("regular", identity);
    expect(spent).toMatchObject({ success: false, remaining: 0 });
    expect(spent.retryAfterMs).toBeGreaterThan(0);
    expect((await limiter.limit("regular", identity)).success).toBe(false);
    // Per bucket.
    expect((await limiter.peek("heavy", identity)).success).toBe(true);
  });

  // An MCP read refused for its request's result budget runs nothing: its call's token is given back.
  it("gives back a counted call on refund, and never goes below nothing", async () => {
    const limiter = make();
    const identity = `refund-${_name}-${Date.now()}`;
    await limiter.refund!("heavy", identity);
    expect(await limiter.peek("heavy", identity)).toMatchObject({ success: true, remaining: 1 });
    expect((await limiter.limit("heavy", identity)).success).toBe(true);
    expect((await limiter.peek("heavy", identity)).success).toBe(false);
    await limiter.refund!("heavy", identity);
    expect(await limiter.peek("heavy", identity)).toMatchObject({ success: true, remaining: 1 });
    expect((await limiter.limit("heavy", identity)).success).toBe(true);
    expect((await limiter.limit("heavy", identity)).success).toBe(false);
  });
});

// A request's refused heavy calls are given back together after it: from the window they were charged
// in, which is the previous one when the minute turned meanwhile, and never more than it counted.
describe.each([
  ["memory", (now: () => number) => new MemoryRateLimiter({ regular: 5, heavy: 5, light: 5 }, now)],
  ["postgres", (now: () => number) => new PostgresRateLimiter({ regular: 5, heavy: 5, light: 5 }, async () => h.database.sql, now)],
] as [string, (now: () => number) => RateLimiter][])("the %s limiter's refund of several calls", (_name, make) => {
  it("takes them from the window they were charged in, down to nothing at most", async () => {
    let now = Date.parse("2026-01-01T00:00:59Z");
    const limiter = make(() => now);
    const identity = `refund-many-${_name}-${Date.now()}`;
    let charged = await limiter.limit("heavy", identity);
    for (let i = 0; i < 4; i++) charged = await limiter.limit("heavy", identity);
    expect((await limiter.peek("heavy", identity)).remaining).toBe(0);
    await limiter.refund!("heavy", identity, 2, charged.reset);
    expect((await limiter.peek("heavy", identity)).remaining).toBe(2);
    // The minute turns: at its start the previous window still weighs in whole (3 of 5), less 2 given back.
    now = charged.reset;
    expect((await limiter.peek("heavy", identity)).remaining).toBe(2);
    await limiter.refund!("heavy", identity, 2, charged.reset);
    expect((await limiter.peek("heavy", identity)).remaining).toBe(4);
    await limiter.refund!("heavy", identity, 50, charged.reset);
    expect((await limiter.peek("heavy", identity)).remaining).toBe(5);
    expect((await limiter.limit("heavy", identity)).remaining).toBe(4);
  });
});

// The refund took one off the window a subquery found with a count above 0, and the UPDATE did not look
// again: on a server, concurrent refunds all picked the window holding 1 and took it below nothing,
// which later let more calls through than the cap. Only a real server's connections run them at once.
describe("the postgres limiter's refunds at once", () => {
  it("never take a window's count below nothing", async () => {
    const limiter = new PostgresRateLimiter(caps, async () => h.database.sql, () => frozen);
    for (let round = 0; round < 5; round++) {
      const identity = `refund-race-${round}-${Date.now()}`;
      expect((await limiter.limit("heavy", identity)).success).toBe(true);
      // The window's row held locked meanwhile, as a charge in flight holds it: every refund has read which window to take from before any takes.
      let refunds: Promise<void[]> | undefined;
      await h.db.$transaction(async (tx) => {
        await tx.$queryRaw`SELECT count FROM rate_limit_windows WHERE key = ${`heavy:${identity}`} FOR UPDATE`;
        refunds = Promise.all(Array.from({ length: 8 }, () => limiter.refund!("heavy", identity)));
        await new Promise((resolve) => setTimeout(resolve, 300));
      });
      await refunds;
      const rows = await h.database.sql.query<{ count: number }>(`SELECT count FROM rate_limit_windows WHERE key = $1`, [`heavy:${identity}`]);
      expect(rows.map((r) => Number(r.count))).toEqual([0]);
      expect(await limiter.peek("heavy", identity)).toMatchObject({ remaining: 1 });
    }
  });
});

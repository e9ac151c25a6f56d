import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { AuthContext } from "@/lib/api/context.ts";
import { countUsage, flushUsage } from "@/lib/usage/count-usage.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await h?.close();
});

/** A database whose usage writes for `userId` fail while `down.value`, counting the attempts. */
function flakyDb(userId: string, down: { value: boolean }) {
  const attempts = { count: 0 };
  const db = h.db.$extends({
    query: {
      usageCounter: {
        async upsert({ args, query }) {
          if (args.where.userId_periodStart?.userId === userId) {
            attempts.count += 1;
            if (down.value) throw new Error("database down");
          }
          return query(args);
        },
      },
    },
  });
  return { db, attempts };
}

describe("usage counts", () => {
  it("a flush returns once every count pending when it was called is written, though another flush is writing", async () => {
    const dan = await h.user("Dan");
    const eve = await h.user("Eve");
    const ctxOf = (user: Client) => ({ user: { id: user.id }, db: h.db, now: () => new Date() }) as unknown as AuthContext;
    for (let round = 1; round <= 5; round++) {
      await countUsage(ctxOf(dan), "pushes");
      // The 250 ms timer's flush takes Dan's count and is writing it ...
      const timer = flushUsage();
      await new Promise((r) => setImmediate(r));
      // ... when Eve's push is counted, and two requests (GET /v1/usage, /v1/auth/me) flush before they read.
      await countUsage(ctxOf(eve), "pushes");
      const [first, second] = [flushUsage(), flushUsage()];
      let firstWritten = false;
      void first.then(() => (firstWritten = true));
      await second;
      // Eve's count went to the first of the two; the second must not return before it is written
      // (on PostgreSQL the read below then saw the count missing, on the embedded database it happened
      // to be queued behind the write).
      expect(firstWritten).toBe(true);
      expect((await h.db.usageCounter.findFirst({ where: { userId: eve.id } }))?.pushes).toBe(round);
      await first;
      await timer;
      expect((await eve.get("/v1/usage")).body.data.push_count).toBe(round);
    }
  });

  it("counts whose write failed (a database hiccup) are written by the next flush, not dropped", async () => {
    const fay = await h.user("Fay");
    let failures = 1;
    const db = h.db.$extends({
      query: {
        usageCounter: {
          async upsert({ args, query }) {
            if (failures > 0) {
              failures -= 1;
              throw new Error("database hiccup");
            }
            return query(args);
          },
        },
      },
    });
    const ctx = { user: { id: fay.id }, db, now: () => new Date() } as unknown as AuthContext;
    vi.useFakeTimers({ toFake: ["Date"] });
    await countUsage(ctx, "pushes");
    await countUsage(ctx, "recalls");
    await flushUsage();
    expect(failures).toBe(0);
    // Tried again once due (5 s later), not by whichever flush comes first.
    vi.setSystemTime(Date.now() + 5_000);
    await flushUsage();
    expect(await h.db.usageCounter.findFirst({ where: { userId: fay.id }, select: { pushes: true, recalls: true } })).toEqual({ pushes: 1, recalls: 1 });
  });

  it("failed counts are tried every 5 s for 5 minutes, however often usage is read meanwhile", async () => {
    const gus = await h.user("Gus");
    const down = { value: true };
    const { db, attempts } = flakyDb(gus.id, down);
    const ctx = { user: { id: gus.id }, db, now: () => new Date() } as unknown as AuthContext;
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    await countUsage(ctx, "pushes");
    await flushUsage();
    expect(attempts.count).toBe(1);
    // Steady traffic during the outage: requests' flushes and GET /v1/usage, /v1/auth/me, summaries.
    for (let i = 0; i < 100; i++) await flushUsage();
    expect(attempts.count).toBe(1);
    for (let second = 5; second < 290; second += 5) {
      vi.setSystemTime(start + second * 1000);
      for (let i = 0; i < 3; i++) await flushUsage();
    }
    expect(attempts.count).toBeLessThanOrEqual(60);
    // Back after 4 minutes 50 s: the counts were still waiting.
    down.value = false;
    vi.setSystemTime(start + 295_000);
    await flushUsage();
    expect(await h.db.usageCounter.findFirst({ where: { userId: gus.id }, select: { pushes: true } })).toEqual({ pushes: 1 });
  });

  it("counts failing later get their own 5 minutes of retries, though older counts of the user are waiting", async () => {
    const hal = await h.user("Hal");
    const down = { value: true };
    const { db } = flakyDb(hal.id, down);
    const ctx = { user: { id: hal.id }, db, now: () => new Date() } as unknown as AuthContext;
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    const flushEvery5sUntil = async (from: number, until: number) => {
      for (let at = from; at <= until; at += 5_000) {
        vi.setSystemTime(start + at);
        await flushUsage();
      }
    };
    await countUsage(ctx, "pushes");
    await flushEvery5sUntil(0, 235_000);
    // 4 minutes into the outage a recall is counted, and fails too.
    vi.setSystemTime(start + 240_000);
    await countUsage(ctx, "recalls");
    await flushEvery5sUntil(240_000, 355_000);
    // The database is back 6 minutes after the first failure, 2 minutes after the recall's.
    down.value = false;
    await flushEvery5sUntil(360_000, 360_000);
    const row = await h.db.usageCounter.findFirst({ where: { userId: hal.id }, select: { recalls: true } });
    expect(row?.recalls).toBe(1);
  });

  it("counts are given up once 5 minutes have passed since they failed", async () => {
    const ivy = await h.user("Ivy");
    const down = { value: true };
    const { db, attempts } = flakyDb(ivy.id, down);
    const ctx = { user: { id: ivy.id }, db, now: () => new Date() } as unknown as AuthContext;
    vi.useFakeTimers({ toFake: ["Date"] });
    const start = Date.now();
    await countUsage(ctx, "asks");
    for (let at = 0; at <= 305_000; at += 5_000) {
      vi.setSystemTime(start + at);
      await flushUsage();
    }
    const tried = attempts.count;
    down.value = false;
    vi.setSystemTime(start + 400_000);
    await flushUsage({ retryAll: true });
    expect(attempts.count).toBe(tried);
    expect(await h.db.usageCounter.findFirst({ where: { userId: ivy.id } })).toBeNull();
  });
});

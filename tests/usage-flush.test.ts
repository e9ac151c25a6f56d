import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthContext } from "@/lib/api/context.ts";
import { countUsage, flushUsage } from "@/lib/usage/count-usage.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

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
    await countUsage(ctx, "pushes");
    await countUsage(ctx, "recalls");
    await flushUsage();
    expect(failures).toBe(0);
    await flushUsage();
    expect(await h.db.usageCounter.findFirst({ where: { userId: fay.id }, select: { pushes: true, recalls: true } })).toEqual({ pushes: 1, recalls: 1 });
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from "vitest";
import { PostgresRateLimiter } from "@/lib/api/postgres-rate-limit.ts";
import { setRateLimiter } from "@/lib/api/rate-limit.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// With the limiter in the database, an API-key request is charged in the statement that reads its
// key (issue 16): the same budget as a separate call, shared by every process, and nothing charged
// for a key that is revoked or expired.

let h: Harness;
const frozen = Date.parse("2026-01-01T00:00:30Z");
const caps = { regular: 2, heavy: 1, light: 1 };
let processA: PostgresRateLimiter;
let processB: PostgresRateLimiter;

beforeAll(async () => {
  h = await createHarness();
  processA = new PostgresRateLimiter(caps, async () => h.database.sql, () => frozen);
  processB = new PostgresRateLimiter(caps, async () => h.database.sql, () => frozen);
  setRateLimiter(processA);
});
afterAll(() => h?.close());
afterEach(() => vi.restoreAllMocks());

/**
 * Watches both limiters' separate charge (limit(), a statement of its own), which still runs as before:
 * without this, the tests held as well had the key's statement never charged and limit() charged instead.
 */
function separateCharges() {
  return [vi.spyOn(processA, "limit"), vi.spyOn(processB, "limit")];
}

async function keyId(user: Client) {
  return (await h.db.apiKey.findFirstOrThrow({ where: { userId: user.id } })).id;
}

describe("a request charged in its API key's statement", () => {
  test("counts against the bucket every process shares, and is refused past it", async () => {
    const ann = await h.user("Ann");
    const separate = separateCharges();
    const first = await ann.get("/v1/memories");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-remaining")).toBe("1");
    // Another process's limiter sees the charge, and charges the same budget.
    expect(await processB.peek("regular", ann.id)).toMatchObject({ success: true, remaining: 1 });
    setRateLimiter(processB);
    expect((await ann.get("/v1/memories")).headers.get("x-ratelimit-remaining")).toBe("0");
    setRateLimiter(processA);
    const refused = await ann.get("/v1/memories");
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("rate_limited");
    expect(refused.headers.get("retry-after")).toBeTruthy();
    // Per bucket: recall's heavy bucket is its own.
    expect((await ann.post("/v1/recall", { query: "anything" })).status).toBe(200);
    expect((await ann.post("/v1/recall", { query: "anything" })).status).toBe(429);
    // Every one of these requests was charged in its key's statement, none by a separate call.
    for (const spy of separate) expect(spy).not.toHaveBeenCalled();
  });

  test("a revoked or expired key is refused at once and charges nothing", async () => {
    const separate = separateCharges();
    const bob = await h.user("Bob");
    await h.db.apiKey.update({ where: { id: await keyId(bob) }, data: { revokedAt: new Date() } });
    for (let i = 0; i < 3; i++) expect((await bob.get("/v1/memories")).status).toBe(401);
    expect(await processB.peek("regular", bob.id)).toMatchObject({ success: true, remaining: 2 });

    const cy = await h.user("Cy");
    await h.db.apiKey.update({ where: { id: await keyId(cy) }, data: { expiresAt: new Date(Date.now() - 1000) } });
    for (let i = 0; i < 3; i++) expect((await cy.get("/v1/memories")).status).toBe(401);
    expect(await processB.peek("regular", cy.id)).toMatchObject({ success: true, remaining: 2 });
    for (const spy of separate) expect(spy).not.toHaveBeenCalled();
  });

  test("an unknown key is refused and charges nobody", async () => {
    const res = await h.anonymous.get("/v1/memories", { headers: { authorization: "Bearer egk_not-a-key" } });
    expect(res.status).toBe(401);
    expect(res.headers.get("x-ratelimit-limit")).toBeNull();
  });
});

import { afterAll, beforeAll, expect, test } from "vitest";
import { rateLimiter, setRateLimiter, UpstashRateLimiter } from "@/lib/api/rate-limit.ts";
import { resetConfig } from "@/lib/config.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startUpstashFake, type UpstashFake } from "./support/upstash-fake.ts";

let fake: UpstashFake;
let h: Harness;
let ann: Client;

beforeAll(async () => {
  fake = await startUpstashFake();
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  for (const key of ["UPSTASH_REDIS_REST_URL", "UPSTASH_REDIS_REST_TOKEN", "ENGRAM_RATE_LIMIT_REGULAR"]) delete process.env[key];
  resetConfig();
  await h.close();
  await fake.stop();
});

test("with UPSTASH_REDIS_REST_URL/TOKEN set, limits are kept in Redis through @upstash/ratelimit", async () => {
  process.env.UPSTASH_REDIS_REST_URL = fake.url;
  process.env.UPSTASH_REDIS_REST_TOKEN = fake.token;
  process.env.ENGRAM_RATE_LIMIT_REGULAR = "3";
  resetConfig();
  setRateLimiter(undefined);
  expect(rateLimiter()).toBeInstanceOf(UpstashRateLimiter);

  // Stay inside one 60 s window: across a boundary the sliding window weighs the previous minute's
  // calls down (three become two) and a fourth call passes.
  const intoWindow = Date.now() % 60_000;
  if (intoWindow > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoWindow + 100));
  const statuses: number[] = [];
  let last;
  for (let i = 0; i < 4; i++) {
    last = await ann.get("/v1/memories");
    statuses.push(last.status);
  }
  expect(statuses).toEqual([200, 200, 200, 429]);
  expect(last!.headers.get("x-ratelimit-limit")).toBe("3");
  expect(last!.headers.get("x-ratelimit-remaining")).toBe("0");
  expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
  expect(last!.body.error).toMatchObject({ code: "rate_limited", details: { limit: 3 } });
  expect(fake.commands.some((c) => c === "evalsha" || c === "eval")).toBe(true);

  // A second process sharing the same Redis sees the same window.
  setRateLimiter(undefined);
  expect((await ann.get("/v1/memories")).status).toBe(429);
  // What MCP checks before reading a body: the spent bucket, without spending.
  expect(await rateLimiter().peek("regular", ann.id)).toMatchObject({ success: false, limit: 3, remaining: 0 });
  expect(await rateLimiter().peek("heavy", ann.id)).toMatchObject({ success: true });
  // A refund (an MCP read refused before it ran) gives one call back.
  await rateLimiter().refund!("regular", ann.id);
  expect(await rateLimiter().peek("regular", ann.id)).toMatchObject({ success: true, remaining: 1 });
  expect((await ann.get("/v1/memories")).status).toBe(200);
  expect((await ann.get("/v1/memories")).status).toBe(429);
});

test("an unreachable Redis lets requests through instead of failing them", async () => {
  process.env.UPSTASH_REDIS_REST_URL = "http://127.0.0.1:9";
  process.env.UPSTASH_REDIS_REST_TOKEN = fake.token;
  resetConfig();
  setRateLimiter(undefined);
  const res = await ann.get("/v1/auth/me");
  expect(res.status).toBe(200);
  expect(res.headers.get("x-ratelimit-limit")).toBe("600");
});

test("sign-in failure counts live in Redis too: a lock set through one instance holds on another", async () => {
  const { checkSignIn, reserveSignIn, settleSignIn, setSignInThrottleStore, UpstashThrottleStore } = await import("@/lib/auth/sign-in-throttle.ts");
  const { Redis } = await import("@upstash/redis");
  const instance = () => new UpstashThrottleStore(new Redis({ url: fake.url, token: fake.token }));
  try {
    setSignInThrottleStore(instance());
    for (let i = 0; i < 5; i++) {
      expect(await reserveSignIn("shared@example.test", `198.51.100.${i}`)).toEqual({ allowed: true });
      await settleSignIn("shared@example.test", `198.51.100.${i}`, false);
    }
    setSignInThrottleStore(instance());
    expect(await checkSignIn("shared@example.test", "203.0.113.1")).toMatchObject({ allowed: false, reason: "locked" });
    expect(await new Redis({ url: fake.url, token: fake.token }).exists("engram:signin:acct:shared@example.test")).toBe(1);
  } finally {
    setSignInThrottleStore(undefined);
  }
});

test("a Redis that accepts the connection and never answers: password sign-in is refused (503) within seconds, not held for good", async () => {
  const { reserveSignIn, setSignInThrottleStore } = await import("@/lib/auth/sign-in-throttle.ts");
  const { createServer } = await import("node:net");
  const sockets: import("node:net").Socket[] = [];
  const silent = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  process.env.UPSTASH_REDIS_REST_URL = `http://127.0.0.1:${(silent.address() as import("node:net").AddressInfo).port}`;
  process.env.UPSTASH_REDIS_REST_TOKEN = fake.token;
  resetConfig();
  setRateLimiter(undefined);
  setSignInThrottleStore(undefined);
  try {
    const started = performance.now();
    // Without a deadline the attempt waited on the socket for as long as it stayed open.
    const verdict = await Promise.race([reserveSignIn("stalled@example.test", "198.51.100.9"), new Promise((resolve) => setTimeout(() => resolve("still waiting"), 8_000))]);
    expect(verdict).toEqual({ allowed: false, reason: "unavailable", retryAfter: 30 });
    expect(performance.now() - started).toBeLessThan(8_000);
    // The request buckets fail open: the request is served.
    expect((await ann.get("/v1/auth/me")).status).toBe(200);
  } finally {
    setSignInThrottleStore(undefined);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
}, 20_000);

test("a sign-in failure given back lowers the count in Redis and lifts the lock the lower count no longer earns; one whose key expired leaves none", async () => {
  const { UpstashThrottleStore } = await import("@/lib/auth/sign-in-throttle.ts");
  const { Redis } = await import("@upstash/redis");
  const store = new UpstashThrottleStore(new Redis({ url: fake.url, token: fake.token }));
  const free = 3;
  const key = `ip:forgive-${Date.now()}`;
  const now = Date.now();
  for (let i = 0; i < 3; i++) await store.fail(key, free, 60_000, now);
  expect((await store.get([key]))[0]).toEqual({ failures: 3, until: now + 30_000 });
  await store.forgive(key, free, now);
  expect((await store.get([key]))[0]).toEqual({ failures: 2, until: 0 });
  await store.forgive(`${key}-gone`, free, now);
  expect((await store.get([`${key}-gone`]))[0]).toBeUndefined();
});

test("sign-in tries from one address sent at once through Redis: past the free failures, only one per expired lock is let through", async () => {
  const { reserveCodeSignIn, setSignInThrottleStore, UpstashThrottleStore } = await import("@/lib/auth/sign-in-throttle.ts");
  const { Redis } = await import("@upstash/redis");
  const redis = new Redis({ url: fake.url, token: fake.token });
  process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
  setSignInThrottleStore(new UpstashThrottleStore(redis));
  try {
    const leaks: string[] = [];
    for (let round = 0; round < 40; round++) {
      // A count raised by one command and its lock set by the next: a try reading between them was let through.
      const address = `192.0.2.${round}-${Date.now()}`;
      await redis.hset(`engram:signin:ip:${address}`, { n: 3, until: Date.now() - 1 });
      const allowed = (await Promise.all(Array.from({ length: 12 }, (_, i) => new Promise((r) => setTimeout(r, i % 4)).then(() => reserveCodeSignIn(address))))).filter((v) => v.allowed).length;
      if (allowed !== 1) leaks.push(`round ${round}: ${allowed}`);
    }
    expect(leaks).toEqual([]);
  } finally {
    delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
    setSignInThrottleStore(undefined);
  }
});

test("a failure given back while another is counted in Redis: the lock the other earns stays, and so does its count on a key that had expired", async () => {
  const { UpstashThrottleStore } = await import("@/lib/auth/sign-in-throttle.ts");
  const { Redis } = await import("@upstash/redis");
  const store = new UpstashThrottleStore(new Redis({ url: fake.url, token: fake.token }));
  const free = 3;
  const lost: string[] = [];
  for (let round = 0; round < 40; round++) {
    const now = Date.now();
    // Two counted; the failure given back and a third counted at once: whichever runs first, three
    // less one is two, and the two after a third is three again, which locks.
    const locked = `ip:forgive-race-${round}-${now}`;
    for (let i = 0; i < 3; i++) await store.fail(locked, free, 60_000, now);
    await Promise.all([store.forgive(locked, free, now), new Promise((r) => setTimeout(r, round % 3)).then(() => store.fail(locked, free, 60_000, now))]);
    const [state] = await store.get([locked]);
    if (!(state?.failures === 3 && state.until > now)) lost.push(`locked ${round}: ${JSON.stringify(state)}`);
    // A reservation given back after its key expired, while a new failure is counted: the new one stays.
    const gone = `ip:forgive-gone-${round}-${now}`;
    await Promise.all([store.forgive(gone, free, now), new Promise((r) => setTimeout(r, round % 3)).then(() => store.fail(gone, free, 60_000, now))]);
    const [fresh] = await store.get([gone]);
    if (fresh?.failures !== 1) lost.push(`gone ${round}: ${JSON.stringify(fresh)}`);
  }
  expect(lost).toEqual([]);
});

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { NextRequest } from "next/server";
import { POST as nextAuthPost } from "@/app/api/auth/[...nextauth]/route.ts";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { hashPassword } from "@/lib/auth/password.ts";
import { authorizePassword } from "@/lib/auth/session-options.ts";
import { checkSignIn, lockMs, MemoryThrottleStore, reserveCodeSignIn, setSignInThrottleStore, UpstashThrottleStore } from "@/lib/auth/sign-in-throttle.ts";
import { PostgresThrottleStore } from "@/lib/auth/postgres-throttle-store.ts";
import { Redis } from "@upstash/redis";
import { createHarness, frozenLimiter, HARNESS_LIMITS, type Harness } from "./support/harness.ts";

// Issue 18, finding 3: sign-in was throttled per e-mail only (60 a minute), with no per-address cap.

let h: Harness;
let email: string;
const PASSWORD = "correct horse battery";

beforeAll(async () => {
  h = await createHarness();
  const ann = await h.user("Ann");
  email = ann.email;
  await h.db.user.update({ where: { id: ann.id }, data: { passwordHash: await hashPassword(PASSWORD) } });
});
afterEach(() => {
  delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
  setSignInThrottleStore(new MemoryThrottleStore());
  setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
});
afterAll(async () => {
  setSignInThrottleStore(undefined);
  await h.close();
});

const from = (address: string) => ({ [SOCKET_ADDRESS_HEADER]: address });
const attempt = (password: string, address = "198.51.100.1", who = email) => authorizePassword(h.db, { email: who, password }, from(address));

describe("sign-in throttling", () => {
  it("locks an account after 5 failures, even for the right password, with a lock that doubles", async () => {
    setSignInThrottleStore(new MemoryThrottleStore());
    for (let i = 0; i < 5; i++) expect(await attempt("wrong password", `198.51.100.${i}`)).toBeNull();
    // The 5 failures came from 5 addresses: the account itself is what is locked now.
    await expect(attempt(PASSWORD, "203.0.113.50")).rejects.toThrow("TooManyAttempts");
    const locked = await checkSignIn(email, "203.0.113.51");
    expect(locked).toMatchObject({ allowed: false, reason: "locked" });
    expect(locked.allowed === false && locked.retryAfter).toBeGreaterThan(25);
    expect(await checkSignIn(email, "203.0.113.51", Date.now() + 31_000)).toEqual({ allowed: true });
    expect([4, 5, 6, 7, 20].map((n) => lockMs(n, 5))).toEqual([0, 30_000, 60_000, 120_000, 900_000]);
  });

  it("attempts sent at once are counted before their passwords are checked: 20 at once get 5 checks, not 20", async () => {
    setSignInThrottleStore(new MemoryThrottleStore());
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => attempt("wrong password", `198.51.100.${100 + i}`)));
    const checked = results.filter((r) => r.status === "fulfilled");
    expect(checked.length).toBe(5);
    expect(results.filter((r) => r.status === "rejected").every((r) => String((r as PromiseRejectedResult).reason).includes("TooManyAttempts"))).toBe(true);
    // Locked now, even for the right password.
    await expect(attempt(PASSWORD, "203.0.113.60")).rejects.toThrow("TooManyAttempts");
  });

  it("attempts at one account refused unchecked count nothing: 20 at once lock it as 5 one after another do (30 s), not for 15 min", async () => {
    const store = new MemoryThrottleStore();
    setSignInThrottleStore(store);
    const started = Date.now();
    await Promise.allSettled(Array.from({ length: 20 }, (_, i) => attempt("wrong password", `198.51.100.${150 + i}`)));
    const [account] = await store.get([`acct:${email}`]);
    expect(account?.failures).toBe(5);
    expect(account!.until).toBeLessThanOrEqual(Date.now() + 30_000);
    expect(account!.until).toBeGreaterThanOrEqual(started + 30_000);
  });

  it("a success clears the account's count", async () => {
    setSignInThrottleStore(new MemoryThrottleStore());
    for (let i = 0; i < 4; i++) expect(await attempt("wrong password")).toBeNull();
    expect(await attempt(PASSWORD)).toMatchObject({ email });
    for (let i = 0; i < 4; i++) expect(await attempt("wrong password")).toBeNull();
    expect(await attempt(PASSWORD)).toMatchObject({ email });
  });

  it("locks an address that guesses across many accounts, and a success does not reset it", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    setSignInThrottleStore(new MemoryThrottleStore());
    for (let i = 0; i < 2; i++) expect(await attempt("guess", "203.0.113.9", `victim-${i}@example.test`)).toBeNull();
    expect(await attempt(PASSWORD, "203.0.113.9")).toMatchObject({ email }); // the attacker's own account
    expect(await attempt("guess", "203.0.113.9", "victim-2@example.test")).toBeNull();
    await expect(attempt("guess", "203.0.113.9", "victim-3@example.test")).rejects.toThrow("TooManyAttempts");
    // Another address is unaffected.
    expect(await attempt(PASSWORD, "203.0.113.10")).toMatchObject({ email });
  });

  it("guesses across many accounts sent at once from one address get no more checks than one after another", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    setSignInThrottleStore(new MemoryThrottleStore());
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => attempt("guess", "203.0.113.20", `sprayed-${i}@example.test`)));
    // One after another, the third failure locks the address: three are checked, five refused.
    expect(results.filter((r) => r.status === "fulfilled").length).toBe(3);
    expect(results.filter((r) => r.status === "rejected").every((r) => String((r as PromiseRejectedResult).reason).includes("TooManyAttempts"))).toBe(true);
    // The right password of an account from there is refused too, as the lock says; from elsewhere it works.
    await expect(attempt(PASSWORD, "203.0.113.20")).rejects.toThrow("TooManyAttempts");
    expect(await attempt(PASSWORD, "203.0.113.21")).toMatchObject({ email });
  });

  it("right passwords from one address sent at once past its free failures: the tries refused unchecked give their count back, so the address is not locked", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const store = new MemoryThrottleStore();
    setSignInThrottleStore(store);
    const { passwordHash } = await h.db.user.findUniqueOrThrow({ where: { email } });
    const office = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const user = await h.user(`Office${i}`);
        await h.db.user.update({ where: { id: user.id }, data: { passwordHash } });
        return user.email;
      }),
    );
    for (let i = 0; i < 2; i++) expect(await attempt("typo", "203.0.113.30", `nobody-${i}@example.test`)).toBeNull();
    const results = await Promise.allSettled(office.map((who) => attempt(PASSWORD, "203.0.113.30", who)));
    expect(results.filter((r) => r.status === "rejected").length).toBeGreaterThan(0);
    // Only the two typos count: the one checked was right, the others were never checked.
    expect(await store.get(["ip:203.0.113.30"])).toEqual([{ failures: 2, until: 0 }]);
    expect(await attempt(PASSWORD, "203.0.113.30", office[1])).toMatchObject({ email: office[1] });
  });

  it("tries refused at once past the free failures leave the lock the try let through earned, not the longer ones they wrote", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const store = new MemoryThrottleStore();
    setSignInThrottleStore(store);
    const now = Date.now();
    for (let i = 0; i < 2; i++) expect(await reserveCodeSignIn("203.0.113.31", now)).toEqual({ allowed: true });
    const verdicts = await Promise.all(Array.from({ length: 4 }, () => reserveCodeSignIn("203.0.113.31", now)));
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(1);
    // The third failure's 30 s, as one after another: not the sixth's 4 min.
    expect(await store.get(["ip:203.0.113.31"])).toEqual([{ failures: 3, until: now + 30_000 }]);
    // And the refusals say so.
    expect(verdicts.filter((v) => !v.allowed).map((v) => v.allowed === false && v.reason === "locked" && v.retryAfter)).toEqual([30, 30, 30]);
  });

  it("a check that throws after the reservation (here a stored hash bcrypt cannot read) counts no failure for the account or the address", async () => {
    const store = new MemoryThrottleStore();
    setSignInThrottleStore(store);
    const broken = await h.user("Broken hash");
    await h.db.user.update({ where: { id: broken.id }, data: { passwordHash: "$3b$11$an6xqxVKh35D/8JeHNotHu0URtMRUEIUwzhimTujdHeeFocYXezpG" } });
    await expect(attempt(PASSWORD, "203.0.113.32", broken.email)).rejects.toThrow();
    const [account, address] = await store.get([`acct:${broken.email}`, "ip:203.0.113.32"]);
    expect([account?.failures ?? 0, address?.failures ?? 0]).toEqual([0, 0]);
  });

  it("a store failing on the address's count after the account's was counted gives the account's back: the refused try charges nothing", async () => {
    // The store failing between its two writes (Upstash or the database dropping a connection).
    class AddressWriteFails extends MemoryThrottleStore {
      override async fail(key: string, free: number, ttlMs: number, now: number) {
        if (key.startsWith("ip:")) throw new Error("store unreachable");
        return super.fail(key, free, ttlMs, now);
      }
    }
    const store = new AddressWriteFails();
    setSignInThrottleStore(store);
    for (let i = 0; i < 6; i++) await expect(attempt(PASSWORD, "203.0.113.33")).rejects.toThrow("SignInUnavailable");
    const [account] = await store.get([`acct:${email}`]);
    expect(account?.failures ?? 0).toBe(0);
    // Once the store is back, the account is not locked by tries that were never checked.
    setSignInThrottleStore(new MemoryThrottleStore());
    expect(await attempt(PASSWORD, "203.0.113.33")).toMatchObject({ email });
  });

  it("a right password once an address's lock ran out leaves the address unlocked, in every store: the next sign-in from there is let through", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    for (const [name, store] of [
      ["memory", new MemoryThrottleStore()],
      ["postgres", new PostgresThrottleStore(async () => h.db)],
    ] as const) {
      setSignInThrottleStore(store);
      const address = name === "memory" ? "203.0.113.34" : "203.0.113.35";
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        for (let i = 0; i < 3; i++) expect(await attempt("guess", address, `lapsed-${i}@example.test`)).toBeNull();
        await expect(attempt(PASSWORD, address), name).rejects.toThrow("TooManyAttempts");
        vi.setSystemTime(Date.now() + 31_000);
        expect(await attempt(PASSWORD, address), name).toMatchObject({ email });
        // The success gave its count back: the address keeps its three failures, and no lock.
        const [state] = await store.get([`ip:${address}`]);
        expect(state?.failures, name).toBe(3);
        expect(state!.until, name).toBeLessThanOrEqual(Date.now());
        expect(await attempt(PASSWORD, address), name).toMatchObject({ email });
        // A further wrong guess still meets the doubled lock, as one after the three failures does.
        expect(await attempt("guess", address, "lapsed-3@example.test")).toBeNull();
        const [after] = await store.get([`ip:${address}`]);
        expect(after!.until - Date.now(), name).toBe(60_000);
      } finally {
        vi.useRealTimers();
      }
    }
  });

  it("the database store prunes expired rows a bounded batch at a time, never a whole backlog in one statement", async () => {
    // Its clock a month back: other tests' expired rows share the table, and pruned in its batches
    // they left more of this backlog than the count below. At this time only the backlog has expired.
    const now = Date.now() - 30 * 86_400_000;
    const expired = BigInt(now - 1_000);
    await h.db.signInThrottle.createMany({ data: Array.from({ length: 500 }, (_, i) => ({ key: `ip:backlog-${i}`, failures: 1, untilMs: 0n, expiresMs: expired })) });
    const left = () => h.db.signInThrottle.count({ where: { key: { startsWith: "ip:backlog-" } } });
    const store = new PostgresThrottleStore(async () => h.db, { batch: 100, batches: 2 });
    // The first failure a process counts prunes (then hourly), without holding the failure up.
    await store.fail("ip:203.0.113.36", 20, 3600_000, now);
    await vi.waitFor(async () => expect(await left()).toBeLessThanOrEqual(300), { timeout: 10_000 });
    // Two batches of 100, and no more: the rest waits for the next prune.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await left()).toBe(300);
    await h.db.signInThrottle.deleteMany({ where: { key: { in: ["ip:203.0.113.36"] } } });
    await h.db.signInThrottle.deleteMany({ where: { key: { startsWith: "ip:backlog-" } } });
  });

  it("a prune that leaves a backlog (its last batch full) runs again within a minute, not an hour later", async () => {
    // Twenty batches an hour, only when a failure came: a spray of more new keys an hour than that
    // outgrew the prune for good. A full last batch now brings the next prune forward.
    const now = Date.now() - 30 * 86_400_000;
    await h.db.signInThrottle.createMany({ data: Array.from({ length: 500 }, (_, i) => ({ key: `ip:sprayed-${i}`, failures: 1, untilMs: 0n, expiresMs: BigInt(now - 1_000) })) });
    const left = () => h.db.signInThrottle.count({ where: { key: { startsWith: "ip:sprayed-" } } });
    const store = new PostgresThrottleStore(async () => h.db, { batch: 100, batches: 2 });
    await store.fail("ip:203.0.113.37", 20, 3600_000, now);
    await vi.waitFor(async () => expect(await left()).toBe(300), { timeout: 10_000 });
    await store.fail("ip:203.0.113.37", 20, 3600_000, now + 61_000);
    await vi.waitFor(async () => expect(await left()).toBe(100), { timeout: 10_000 });
    // A short last batch: the backlog is gone, and the next prune is an hour away again.
    await store.fail("ip:203.0.113.37", 20, 3600_000, now + 122_000);
    await vi.waitFor(async () => expect(await left()).toBe(0), { timeout: 10_000 });
    await h.db.signInThrottle.createMany({ data: [{ key: "ip:sprayed-late", failures: 1, untilMs: 0n, expiresMs: BigInt(now) }] });
    await store.fail("ip:203.0.113.37", 20, 3600_000, now + 183_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await left()).toBe(1);
    await h.db.signInThrottle.deleteMany({ where: { key: { in: ["ip:203.0.113.37", "ip:sprayed-late"] } } });
  });

  it("caps password attempts per address in the request bucket too (X-Forwarded-For does not rotate it)", async () => {
    setRateLimiter(frozenLimiter({ regular: 100, heavy: 2, light: 100 }));
    const spoofed = (i: number) => authorizePassword(h.db, { email, password: PASSWORD }, { ...from("198.51.100.77"), "x-forwarded-for": `10.9.9.${i}` });
    expect(await spoofed(1)).toMatchObject({ email });
    expect(await spoofed(2)).toMatchObject({ email });
    await expect(spoofed(3)).rejects.toThrow("TooManyAttempts");
  });

  it("the sign-in endpoint answers a locked account with a clear 429 and Retry-After", async () => {
    setSignInThrottleStore(new MemoryThrottleStore());
    for (let i = 0; i < 5; i++) await attempt("wrong password");
    const req = new NextRequest("http://engram.test/api/auth/callback/credentials", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...from("198.51.100.1") },
      body: new URLSearchParams({ email, password: PASSWORD, csrfToken: "x", json: "true" }).toString(),
    });
    const res = await nextAuthPost(req, { params: Promise.resolve({ nextauth: ["callback", "credentials"] }) });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    const body = await res.json();
    // The failures free before the lock that refused it (the account's five), as every 429 says.
    expect(body.error).toMatchObject({ code: "rate_limited", details: { limit: 5, retry_after: Number(res.headers.get("retry-after")) } });
    expect(body.error.message).toMatch(/Too many failed sign-in attempts; try again in \d+ s/);
    expect(body.url).toBe("/sign-in?error=TooManyAttempts");
  });

  it("the in-process store stays bounded when failures come for ever new e-mails and addresses; a key failing now keeps its lock", async () => {
    const store = new MemoryThrottleStore(10);
    const now = Date.now();
    const free = 5;
    for (let i = 0; i < 6; i++) await store.fail("acct:victim@example.test", free, 24 * 3600_000, now);
    for (let i = 0; i < 100; i++) {
      await store.fail(`acct:flood-${i}@example.test`, free, 24 * 3600_000, now);
      if (i % 5 === 0) await store.fail("acct:victim@example.test", free, 24 * 3600_000, now);
    }
    const keys = Array.from({ length: 100 }, (_, i) => `acct:flood-${i}@example.test`);
    const kept = (await store.get(keys)).filter(Boolean).length;
    expect(kept).toBeLessThanOrEqual(10);
    const [victim] = await store.get(["acct:victim@example.test"]);
    expect(victim?.until).toBeGreaterThan(now);
  });

  it("fails closed when Upstash is unreachable: password sign-in is refused (503), not unlimited", async () => {
    setSignInThrottleStore(new UpstashThrottleStore(new Redis({ url: "http://127.0.0.1:9", token: "t", retry: false })));
    await expect(attempt(PASSWORD)).rejects.toThrow("SignInUnavailable");
    const req = new NextRequest("http://engram.test/api/auth/callback/credentials", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...from("198.51.100.1") },
      body: new URLSearchParams({ email, password: PASSWORD, csrfToken: "x", json: "true" }).toString(),
    });
    const res = await nextAuthPost(req, { params: Promise.resolve({ nextauth: ["callback", "credentials"] }) });
    expect(res.status).toBe(503);
    expect((await res.json()).error.code).toBe("unavailable");
  });
});

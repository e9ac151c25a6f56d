import type { Redis } from "@upstash/redis";
import { config, wholeNumberEnv } from "@/lib/config.ts";
import { rateLimitStore, upstashRedis } from "@/lib/api/rate-limit.ts";
import { getDatabase } from "@/lib/db/database.ts";
import { PostgresThrottleStore } from "./postgres-throttle-store.ts";
import { BASE_LOCK_MS, lockMs, MAX_LOCK_MS } from "./sign-in-lock.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";

/**
 * Password guessing limits (issue 18 #3). Failed sign-ins are counted per account (e-mail) and per
 * client address; past a few free failures each further one locks that key for twice as long as the
 * last (30 s, 1 min, 2 min … 15 min). A success clears the account's count, never the address's
 * (an attacker with one real account must not be able to reset their address).
 *
 * The counts live where the request buckets live: in this process, or in Upstash Redis when it is
 * configured, so every instance sees them. Unlike the request buckets, these FAIL CLOSED: when
 * Upstash cannot be reached, sign-in with a password is refused (503) rather than left unlimited.
 */
export interface ThrottleState {
  failures: number;
  /** Unix ms until which the key is locked (0: not locked). */
  until: number;
}

export interface ThrottleStore {
  get(keys: string[]): Promise<(ThrottleState | undefined)[]>;
  /**
   * Counts one more failure and stores the lock lockMs gives for it (`free` failures free), both in
   * one atomic write: a reader must never see the new count without its lock.
   */
  fail(key: string, free: number, ttlMs: number, now: number): Promise<ThrottleState>;
  clear(key: string): Promise<void>;
  /**
   * Takes back one failure `fail` counted for an attempt that turned out not to be one, lifting the
   * lock the lower count no longer earns (a lock an earlier failure past the free ones earned stays,
   * cut to what the lower count earns from now: tries refused at once wrote longer ones).
   * `letThrough`: the failure was the try let through, counted while no lock ran, so the key goes
   * back to no lock: its own lock refused every other try meanwhile, uncounted, so no lock left
   * is another's (cut to the lower count's, a right password after a lock ran out locked its
   * address again for the length of the lock that had just ended).
   */
  forgive(key: string, free: number, now: number, letThrough?: boolean): Promise<void>;
}

interface Policy {
  free: number;
  /** How long an idle key is remembered. */
  ttlMs: number;
}


/** ENGRAM_SIGNIN_ACCOUNT_FAILURES (5) and ENGRAM_SIGNIN_IP_FAILURES (20): failures before the first lock. */
function policies(): { account: Policy; address: Policy } {
  return {
    account: { free: wholeNumberEnv("ENGRAM_SIGNIN_ACCOUNT_FAILURES", 5), ttlMs: 24 * 3600_000 },
    address: { free: wholeNumberEnv("ENGRAM_SIGNIN_IP_FAILURES", 20), ttlMs: 3600_000 },
  };
}

export { lockMs };

/** Keys the in-process store holds at most (~100 bytes each). */
const MAX_MEMORY_ENTRIES = 100_000;

export class MemoryThrottleStore implements ThrottleStore {
  private readonly entries = new Map<string, ThrottleState & { expires: number }>();

  constructor(private readonly maxEntries = MAX_MEMORY_ENTRIES) {}

  async get(keys: string[]) {
    const now = Date.now();
    return keys.map((key) => {
      const entry = this.entries.get(key);
      return entry && entry.expires > now ? { failures: entry.failures, until: entry.until } : undefined;
    });
  }

  async fail(key: string, free: number, ttlMs: number, now: number) {
    const previous = this.entries.get(key);
    const failures = (previous && previous.expires > now ? previous.failures : 0) + 1;
    const lock = lockMs(failures, free);
    const state = { failures, until: lock ? now + lock : 0, expires: now + Math.max(ttlMs, lock) };
    // Re-inserted, so the map runs from the longest-idle key to the latest failure.
    this.entries.delete(key);
    this.entries.set(key, state);
    if (this.entries.size > this.maxEntries) this.shrink(now);
    return { failures, until: state.until };
  }

  async clear(key: string) {
    this.entries.delete(key);
  }

  async forgive(key: string, free: number, now: number, letThrough = false) {
    const entry = this.entries.get(key);
    if (!entry || entry.expires <= now || entry.failures === 0) return;
    entry.failures -= 1;
    const lock = letThrough ? 0 : lockMs(entry.failures, free);
    entry.until = lock ? Math.min(entry.until, now + lock) : 0;
  }

  /**
   * Failures for fresh addresses and e-mails (an IPv6 /48 holds 65,536 /64s) add keys that live a
   * day: past the cap the expired go, then the longest idle until a tenth is free, so the map stays
   * bounded and the sweep runs once per many failures, not on every one. An evicted key's lock is
   * lost only after a tenth of the cap in newer failures.
   */
  private shrink(now: number) {
    for (const [k, v] of this.entries) if (v.expires <= now) this.entries.delete(k);
    const keep = Math.floor(this.maxEntries * 0.9);
    for (const k of this.entries.keys()) {
      if (this.entries.size <= keep) break;
      this.entries.delete(k);
    }
  }
}

/**
 * fail's count and lock in one script (lockMs in Lua): with the lock written by a second command, a
 * try reading between them was let through as if a lock had just run out. The numbers are written
 * with %d: Lua would write a Unix ms time in exponent notation.
 */
const UPSTASH_FAIL = `
local free, now, ttl, base, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local lock = 0
if n >= free then lock = math.min(max, base * 2 ^ math.min(n - free, 20)) end
local untilMs = 0
if lock > 0 then untilMs = now + lock end
redis.call('HSET', KEYS[1], 'until', string.format('%d', untilMs))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(ttl, lock)))
return {n, string.format('%d', untilMs)}`;

/**
 * forgive in one script: a failure counted between a decrement and a separate unlock had its fresh
 * lock wiped, and a decrement of an expired key made a key a failure counted meanwhile was deleted with.
 */
const UPSTASH_FORGIVE = `
local free, now, base, max, letThrough = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if n <= 0 then return 0 end
n = redis.call('HINCRBY', KEYS[1], 'n', -1)
if n < free or letThrough == 1 then
  redis.call('HSET', KEYS[1], 'until', '0')
else
  local untilMs = math.min(tonumber(redis.call('HGET', KEYS[1], 'until') or '0'), now + math.min(max, base * 2 ^ math.min(n - free, 20)))
  redis.call('HSET', KEYS[1], 'until', string.format('%d', untilMs))
end
return n`;

export class UpstashThrottleStore implements ThrottleStore {
  constructor(private readonly redis: Redis) {}

  private static key(key: string) {
    return `engram:signin:${key}`;
  }

  async get(keys: string[]) {
    const rows = await Promise.all(keys.map((key) => this.redis.hgetall<Record<string, unknown>>(UpstashThrottleStore.key(key))));
    return rows.map((row) => (row && row.n !== undefined ? { failures: Number(row.n), until: Number(row.until ?? 0) } : undefined));
  }

  async fail(key: string, free: number, ttlMs: number, now: number) {
    const [failures, until] = await this.redis.eval<(string | number)[], [number, number]>(UPSTASH_FAIL, [UpstashThrottleStore.key(key)], [free, now, ttlMs, BASE_LOCK_MS, MAX_LOCK_MS]);
    return { failures: Number(failures), until: Number(until) };
  }

  async clear(key: string) {
    await this.redis.del(UpstashThrottleStore.key(key));
  }

  async forgive(key: string, free: number, now: number, letThrough = false) {
    await this.redis.eval(UPSTASH_FORGIVE, [UpstashThrottleStore.key(key)], [free, now, BASE_LOCK_MS, MAX_LOCK_MS, letThrough ? 1 : 0]);
  }
}

const globalForThrottle = globalThis as unknown as { __engramSignInThrottle?: ThrottleStore };

export function signInThrottleStore(): ThrottleStore {
  if (!globalForThrottle.__engramSignInThrottle) {
    const { upstash } = config();
    globalForThrottle.__engramSignInThrottle = upstash
      ? new UpstashThrottleStore(upstashRedis(upstash))
      : rateLimitStore() === "postgres"
        ? new PostgresThrottleStore(async () => (await getDatabase()).prisma)
        : new MemoryThrottleStore();
  }
  return globalForThrottle.__engramSignInThrottle;
}

/** Tests swap the store (or reset it after changing the environment). */
export function setSignInThrottleStore(store: ThrottleStore | undefined): void {
  globalForThrottle.__engramSignInThrottle = store;
}

export type SignInVerdict =
  | { allowed: true }
  /** limit: the failures free before the lock that refuses it (details.limit of the 429). */
  | { allowed: false; reason: "locked"; retryAfter: number; limit: number }
  | { allowed: false; reason: "unavailable"; retryAfter: number };

const keysFor = (email: string, address: string) => ({ account: `acct:${email.trim().toLowerCase()}`, address: `ip:${address}` });

/** Whether a password attempt for `email` from `address` may be checked at all. Fails closed. */
export async function checkSignIn(email: string, address: string, now = Date.now()): Promise<SignInVerdict> {
  const { account, address: ip } = keysFor(email, address);
  let states: (ThrottleState | undefined)[];
  try {
    states = await signInThrottleStore().get([account, ip]);
  } catch (error) {
    console.error("sign-in throttle: its store is unreachable; refusing password sign-in until it is back", error);
    return { allowed: false, reason: "unavailable", retryAfter: 30 };
  }
  const [accountState, ipState] = states;
  const { account: accountPolicy, address: addressPolicy } = policies();
  const accountLocksLonger = (accountState?.until ?? 0) >= (ipState?.until ?? 0);
  return lockVerdict(Math.max(accountState?.until ?? 0, ipState?.until ?? 0), now, accountLocksLonger ? accountPolicy.free : addressPolicy.free);
}

/** Refused while a lock runs (until `until`, Unix ms). */
function lockVerdict(until: number, now: number, limit: number): SignInVerdict {
  return until > now ? { allowed: false, reason: "locked", retryAfter: retryAfterSeconds(until - now), limit } : { allowed: true };
}

/**
 * A try counted past the free failures while another was let through: refused unchecked, so its
 * count goes back, and its Retry-After is the lock that stays, not the longer one its count wrote.
 */
async function refuseUnchecked(store: ThrottleStore, key: string, free: number, now: number): Promise<SignInVerdict> {
  await store.forgive(key, free, now);
  const [state] = await store.get([key]);
  return lockVerdict(Math.max(state?.until ?? 0, now + 1), now, free);
}

/**
 * checkSignIn, then the attempt counted against the account and the client address before its
 * password is checked, so attempts sent at once cannot all pass one unlocked read (for one account,
 * or spread over many from one address): within the free failures each may be checked; past them
 * only the first to be counted (the one an expired lock lets through), the rest are refused.
 * settleSignIn then clears the account's count on success and gives the address's back.
 */
export async function reserveSignIn(email: string, address: string, now = Date.now()): Promise<SignInVerdict> {
  const { account, address: ip } = keysFor(email, address);
  const store = signInThrottleStore();
  const { account: policy, address: addressPolicy } = policies();
  try {
    const [before, ipState] = await store.get([account, ip]);
    const accountLocksLonger = (before?.until ?? 0) >= (ipState?.until ?? 0);
    const locked = lockVerdict(Math.max(before?.until ?? 0, ipState?.until ?? 0), now, accountLocksLonger ? policy.free : addressPolicy.free);
    if (!locked.allowed) return locked;
    const after = await store.fail(account, policy.free, policy.ttlMs, now);
    if (after.failures > policy.free && after.failures !== (before?.failures ?? 0) + 1) {
      // Refused unchecked: no failure, as one after another would be (tries sent at once must not
      // lock an account longer than the same tries spread out).
      return await refuseUnchecked(store, account, policy.free, now);
    }
    let ipAfter: ThrottleState;
    try {
      ipAfter = await store.fail(ip, addressPolicy.free, addressPolicy.ttlMs, now);
    } catch (error) {
      // The try is refused unchecked (503): the account's count must go back with it, or every try
      // while the store fails between its two writes charged the account and locked its owner out.
      await store.forgive(account, policy.free, now, true).catch((undo: unknown) => console.error("sign-in throttle: could not give back an account's count", undo));
      throw error;
    }
    if (ipAfter.failures > addressPolicy.free && ipAfter.failures !== (ipState?.failures ?? 0) + 1) {
      // Refused for its address, unchecked: no try at the account's password, nor a failure of the
      // address (people behind one address signing in at once would lock it out).
      await store.forgive(account, policy.free, now, true);
      return await refuseUnchecked(store, ip, addressPolicy.free, now);
    }
    return { allowed: true };
  } catch (error) {
    console.error("sign-in throttle: its store is unreachable; refusing password sign-in until it is back", error);
    return { allowed: false, reason: "unavailable", retryAfter: 30 };
  }
}

/** The outcome of an attempt reserveSignIn let through (its failure is already counted for both keys). */
export async function settleSignIn(email: string, address: string, success: boolean, now = Date.now()): Promise<void> {
  const { account, address: ip } = keysFor(email, address);
  const store = signInThrottleStore();
  const { address: policy } = policies();
  try {
    if (!success) return;
    await store.clear(account);
    // Only the reservation goes: a success never clears the address's earlier failures.
    await store.forgive(ip, policy.free, now, true);
  } catch (error) {
    console.error("sign-in throttle: could not record a sign-in attempt", error);
  }
}

/**
 * Gives back both counts of an attempt reserveSignIn let through whose check never ran to an answer
 * (the database failed meanwhile): that was no failed guess.
 */
export async function releaseSignIn(email: string, address: string, now = Date.now()): Promise<void> {
  const { account, address: ip } = keysFor(email, address);
  const store = signInThrottleStore();
  const { account: accountPolicy, address: addressPolicy } = policies();
  try {
    await store.forgive(account, accountPolicy.free, now, true);
    await store.forgive(ip, addressPolicy.free, now, true);
  } catch (error) {
    console.error("sign-in throttle: could not give back a sign-in attempt", error);
  }
}

/**
 * Whether a mailed sign-in code from `address` may be checked, the attempt counted against the client
 * address before its code is checked: only the address's lock counts (a locked account is no reason
 * to refuse the proof its owner's mailbox gives). Fails closed. As reserveSignIn does for a password,
 * as reserveSignIn does for a password: a wrong mailed code counts as a failed sign-in of the address,
 * with its password failures (each code allows five tries, but one client spraying guesses over many
 * addresses must meet a bound), and guesses sent at once get no more checks than one after another.
 * An attempt that was no guess gives its count back (forgiveCodeSignIn).
 */
export async function reserveCodeSignIn(address: string, now = Date.now()): Promise<SignInVerdict> {
  const key = keysFor("", address).address;
  const store = signInThrottleStore();
  const { address: policy } = policies();
  try {
    const [before] = await store.get([key]);
    const locked = lockVerdict(before?.until ?? 0, now, policy.free);
    if (!locked.allowed) return locked;
    const after = await store.fail(key, policy.free, policy.ttlMs, now);
    if (after.failures > policy.free && after.failures !== (before?.failures ?? 0) + 1) return await refuseUnchecked(store, key, policy.free, now);
    return { allowed: true };
  } catch (error) {
    console.error("sign-in throttle: its store is unreachable; refusing code sign-in until it is back", error);
    return { allowed: false, reason: "unavailable", retryAfter: 30 };
  }
}

/**
 * Gives back the count of an attempt reserveCodeSignIn let through that was no wrong guess: a right
 * code, or a try with no live code to guess (spent by a verify it raced, expired, never asked for),
 * so double submits and the people behind one address signing in do not lock it out.
 */
export async function forgiveCodeSignIn(address: string, now = Date.now()): Promise<void> {
  const { address: policy } = policies();
  try {
    await signInThrottleStore().forgive(keysFor("", address).address, policy.free, now, true);
  } catch (error) {
    console.error("sign-in throttle: could not give back a sign-in attempt", error);
  }
}

/** The message the sign-in form shows for a refusal. */
export function signInRefusal(verdict: Exclude<SignInVerdict, { allowed: true }>): { status: 429 | 503; code: string; message: string } {
  return verdict.reason === "locked"
    ? { status: 429, code: "rate_limited", message: `Too many failed sign-in attempts; try again in ${verdict.retryAfter} s` }
    : { status: 503, code: "unavailable", message: `Sign-in is briefly unavailable; try again in ${verdict.retryAfter} s` };
}

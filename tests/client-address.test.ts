import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { POST as signUpRoute } from "@/app/api/auth/sign-up/route.ts";
import { clientAddress, SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { createHarness, frozenLimiter, HARNESS_LIMITS, type Harness } from "./support/harness.ts";

// Issue 18, finding 2: per-IP limits believed X-Forwarded-For from anyone.

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterEach(() => {
  delete process.env.TRUST_PROXY;
  delete process.env.ENGRAM_TRUSTED_PROXIES;
  setRateLimiter(new MemoryRateLimiter(HARNESS_LIMITS));
});
afterAll(async () => {
  await h.close();
});

const req = (headers: Record<string, string>) => new Request("http://engram.test/v1/health", { headers });

describe("client address for per-IP limits", () => {
  it("is the socket address when no proxy is configured, whatever X-Forwarded-For and X-Real-IP say", () => {
    expect(clientAddress(req({ [SOCKET_ADDRESS_HEADER]: "198.51.100.9", "x-forwarded-for": "1.2.3.4", "x-real-ip": "5.6.7.8" }))).toBe("198.51.100.9");
    expect(clientAddress(req({ [SOCKET_ADDRESS_HEADER]: "::ffff:198.51.100.9" }))).toBe("198.51.100.9");
    expect(clientAddress(req({ "x-forwarded-for": "1.2.3.4" }))).toBe("unknown");
  });

  it("with ENGRAM_TRUSTED_PROXIES, believes X-Forwarded-For only from those proxies, right-most untrusted hop", () => {
    process.env.ENGRAM_TRUSTED_PROXIES = "10.0.0.0/8, 192.0.2.1";
    const viaProxy = (xff: string) => clientAddress(req({ [SOCKET_ADDRESS_HEADER]: "10.1.2.3", "x-forwarded-for": xff }));
    expect(viaProxy("203.0.113.5")).toBe("203.0.113.5");
    // A client-supplied first hop is not believed: the proxy appended the real peer.
    expect(viaProxy("6.6.6.6, 203.0.113.5, 192.0.2.1")).toBe("203.0.113.5");
    // Straight from the internet: the header is the caller's own word.
    expect(clientAddress(req({ [SOCKET_ADDRESS_HEADER]: "203.0.113.77", "x-forwarded-for": "6.6.6.6" }))).toBe("203.0.113.77");
  });

  it("with TRUST_PROXY=1 (a platform that sets the header, e.g. Vercel), takes the last hop", () => {
    process.env.TRUST_PROXY = "1";
    expect(clientAddress(req({ "x-forwarded-for": "203.0.113.5" }))).toBe("203.0.113.5");
    expect(clientAddress(req({ "x-forwarded-for": "6.6.6.6, 203.0.113.5" }))).toBe("203.0.113.5");
    expect(clientAddress(req({ "x-real-ip": "203.0.113.6" }))).toBe("203.0.113.6");
  });

  it("rejects a malformed ENGRAM_TRUSTED_PROXIES instead of trusting nothing silently", () => {
    process.env.ENGRAM_TRUSTED_PROXIES = "proxy.internal";
    expect(() => clientAddress(req({}))).toThrow(/ENGRAM_TRUSTED_PROXIES/);
    // A CIDR missing its prefix length must not become /0 (every address a trusted proxy).
    for (const entry of ["10.0.0.0/", "10.0.0.0/33", "10.0.0.0/8x", "2001:db8::/129"]) {
      process.env.ENGRAM_TRUSTED_PROXIES = entry;
      expect(() => clientAddress(req({ [SOCKET_ADDRESS_HEADER]: "203.0.113.77", "x-forwarded-for": "6.6.6.6" })), entry).toThrow(/ENGRAM_TRUSTED_PROXIES/);
    }
  });
});

describe("rotating X-Forwarded-For does not bypass per-IP limits", () => {
  const from = (xff: string) => ({ [SOCKET_ADDRESS_HEADER]: "198.51.100.20", "x-forwarded-for": xff });

  it("sign-up (heavy bucket, per IP)", async () => {
    process.env.ENGRAM_ALLOW_SIGNUP = "true";
    setRateLimiter(frozenLimiter({ regular: 100, heavy: 2, light: 100 }));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await signUpRoute(
        new Request("http://engram.test/api/auth/sign-up", {
          method: "POST",
          headers: { "content-type": "application/json", ...from(`203.0.113.${i}`) },
          body: JSON.stringify({ email: `rotate-${i}@example.test`, password: "correct horse battery", name: "R" }),
        }),
        { params: Promise.resolve({}) },
      );
      statuses.push(res.status);
    }
    delete process.env.ENGRAM_ALLOW_SIGNUP;
    expect(statuses).toEqual([201, 201, 429]);
  });

  it("the admin endpoint and invite lookup (both regular), per IP", async () => {
    setRateLimiter(frozenLimiter({ regular: 2, heavy: 100, light: 100 }));
    const admin = [];
    for (let i = 0; i < 3; i++) admin.push((await h.anonymous.post("/v1/admin/users", { email: "x@example.test" }, { headers: from(`203.0.113.${i}`) })).status);
    expect(admin[2]).toBe(429);
    setRateLimiter(frozenLimiter({ regular: 2, heavy: 100, light: 100 }));
    const lookups = [];
    for (let i = 0; i < 3; i++) lookups.push((await h.anonymous.get("/v1/invites/eginv_nothing", { headers: from(`203.0.113.${i}`) })).status);
    expect(lookups[2]).toBe(429);
    // A different socket address has its own budget.
    expect((await h.anonymous.get("/v1/invites/eginv_nothing", { headers: { [SOCKET_ADDRESS_HEADER]: "198.51.100.21" } })).status).not.toBe(429);
  });
});

describe("IPv6 clients count by their /64", () => {
  it("every address of one /64, however written, is one client; the next /64 is another", () => {
    const key = (address: string) => clientAddress(req({ [SOCKET_ADDRESS_HEADER]: address }));
    expect(key("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(key("2001:0DB8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(key("[2001:db8:1:2:0:0:0:7]:443")).toBe("2001:db8:1:2::/64");
    expect(key("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(key("2001:db8:1:3::1")).not.toBe(key("2001:db8:1:2::1"));
    // IPv4 (also as IPv4-mapped IPv6) stays one address.
    expect(key("::ffff:198.51.100.9")).toBe("198.51.100.9");
    process.env.TRUST_PROXY = "1";
    expect(clientAddress(req({ "x-forwarded-for": "2001:db8:1:2:a:b:c:d" }))).toBe("2001:db8:1:2::/64");
  });

  it("rotating addresses within one /64 does not bypass a public endpoint's limit", async () => {
    setRateLimiter(frozenLimiter({ regular: 100, heavy: 100, light: 2 }));
    const statuses: number[] = [];
    for (let i = 1; i <= 3; i++) statuses.push((await h.anonymous.get("/v1/health", { headers: { [SOCKET_ADDRESS_HEADER]: `2001:db8:77:1::${i.toString(16)}` } })).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await h.anonymous.get("/v1/health", { headers: { [SOCKET_ADDRESS_HEADER]: "2001:db8:77:2::1" } })).status).toBe(200);
  });
});

import { readdirSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { getHub } from "@/lib/hubs/get-hub.ts";
import { listMemories } from "@/lib/memories/list-memories.ts";
import { ONBOARDING_ITEMS } from "@/lib/onboarding/onboarding-items.ts";
import { prefetchFor } from "@/lib/web/prefetch.ts";
import { createHarness, frozenLimiter, HARNESS_LIMITS, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});
afterAll(async () => {
  await h?.close();
});

const APP = path.join(process.cwd(), "app");

/** Every dashboard page as a pattern of path segments: route groups "(x)" drop out, "[id]" matches any one segment. */
function pagePatterns(dir = APP, segments: string[] = []): string[][] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.isFile()) return entry.name === "page.tsx" ? [segments] : [];
    if (!entry.isDirectory()) return [];
    const group = /^\(.*\)$/.test(entry.name);
    return pagePatterns(path.join(dir, entry.name), group ? segments : [...segments, entry.name]);
  });
}

function hasPage(url: string): boolean {
  const parts = new URL(url, "http://engram.test").pathname.split("/").filter(Boolean);
  return pagePatterns().some(
    (pattern) => pattern.length === parts.length && pattern.every((segment, i) => /^\[[^.\]]+\]$/.test(segment) || segment === parts[i]),
  );
}

describe("dashboard pages", () => {
  it("every link of the getting-started checklist opens a dashboard page, not a 404", () => {
    expect(hasPage("/hubs")).toBe(true);
    expect(hasPage("/hubs/0190f0f0-0000-7000-8000-000000000000/members")).toBe(true);
    expect(hasPage("/nowhere")).toBe(false);
    for (const item of ONBOARDING_ITEMS) expect(hasPage(item.cta_url), `${item.id}: ${item.cta_url}`).toBe(true);
  });
});

describe("server-side prefetch (a page's first data in its HTML)", () => {
  const as = (who: Client) => ({ id: who.id, email: who.email, name: who.name });

  it("reads only what the user could read through the API", async () => {
    const hub = await prefetchFor(as(ann), (ctx) => getHub(ctx, ann.personalHubId));
    expect(hub).toMatchObject({ hub: { id: ann.personalHubId }, role: "owner" });
    expect(await prefetchFor(as(bob), (ctx) => getHub(ctx, ann.personalHubId))).toBeUndefined();
    expect(await prefetchFor(as(bob), (ctx) => listMemories(ctx, { hub_id: ann.personalHubId, limit: "10", sort: "newest" }))).toBeUndefined();
  });

  it("spends the user's request budget like the API call it stands in for, so reloading a page is no way around the limit", async () => {
    setRateLimiter(frozenLimiter({ regular: 3, heavy: 100, light: 100 }));
    try {
      const read = () => prefetchFor(as(ann), (ctx) => getHub(ctx, ann.personalHubId));
      for (let i = 0; i < 3; i++) expect(await read(), `read ${i + 1}`).toBeDefined();
      expect(await read()).toBeUndefined();
      // The page's own request then gets the usual answer.
      expect((await ann.get(`/v1/hubs/${ann.personalHubId}`)).status).toBe(429);
      // Another user's budget is untouched.
      expect(await prefetchFor(as(bob), (ctx) => getHub(ctx, bob.personalHubId))).toBeDefined();
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });
});

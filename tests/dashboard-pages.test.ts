import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ONBOARDING_ITEMS } from "@/lib/onboarding/onboarding-items.ts";

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

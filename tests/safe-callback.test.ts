import { describe, expect, it } from "vitest";
import { safeCallback, sameOriginPath } from "@/lib/web/safe-callback.ts";

describe("safeCallback (where sign-in goes next)", () => {
  it("keeps same-site paths with their query and fragment", () => {
    expect(safeCallback("/hubs/abc?tab=members#top")).toBe("/hubs/abc?tab=members#top");
    expect(safeCallback("/link/github?x=1")).toBe("/link/github?x=1");
    expect(safeCallback(["/hubs", "/other"])).toBe("/hubs");
  });

  it("never leads to another site, however the path is spelled", () => {
    for (const bad of [
      "//evil.com",
      "/\\evil.com",
      "/\t/evil.com", // browsers drop the tab: "//evil.com"
      "/\n/evil.com",
      "/\r\n/evil.com",
      "/ /evil.com",
      "/\u0000/evil.com",
      "https://evil.com",
      "evil.com",
      "",
      null,
      undefined,
    ]) {
      expect(safeCallback(bad), JSON.stringify(bad)).toBe("/hubs");
    }
    // Whatever it returns is read by a browser as a path on this site.
    for (const value of ["/%2F/evil.com", "/./\\evil.com", "/a/../..//evil.com"]) {
      const followed = new URL(safeCallback(value), "https://engram.example");
      expect(followed.origin, value).toBe("https://engram.example");
      expect(followed.pathname.startsWith("//"), value).toBe(false);
    }
  });

  it("an answer from the auth server is followed only when it stays on this site", () => {
    const origin = "https://engram.example";
    expect(sameOriginPath(new URL("/hubs?x=1", origin), origin)).toBe("/hubs?x=1");
    expect(sameOriginPath(new URL("https://engram.example//evil.com"), origin)).toBeNull();
    expect(sameOriginPath(new URL("https://engram.example/\t/evil.com"), origin)).toBeNull();
    expect(sameOriginPath(new URL("https://evil.com/hubs"), origin)).toBeNull();
  });
});

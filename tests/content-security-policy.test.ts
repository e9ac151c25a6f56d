import { unstable_doesMiddlewareMatch } from "next/experimental/testing/server";
import { NextRequest } from "next/server";
import { describe, expect, it } from "vitest";
import { config, proxy } from "@/proxy.ts";

// The dashboard's pages render memory content, chat answers, hub names and notification payloads.
// React and the markdown renderer escape them; the page policy is what still stands if one ever
// does not: only scripts Next itself put in this response (its nonce) run.

function directives(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name!, values]),
  );
}

/** The policy the browser gets and the one Next reads its nonce from (the request it renders). */
function policies(res: Response): { sent: string; rendered: string } {
  return {
    sent: res.headers.get("content-security-policy") ?? "",
    rendered: res.headers.get("x-middleware-request-content-security-policy") ?? "",
  };
}

describe("the dashboard pages' Content-Security-Policy", () => {
  it("runs only scripts carrying this response's nonce, and keeps framing, plugins and <base> off", async () => {
    const { sent, rendered } = policies(await proxy(new NextRequest("http://engram.test/hubs/abc")));
    const policy = directives(sent);
    const script = policy.get("script-src") ?? [];
    const nonce = script.find((s) => s.startsWith("'nonce-"));
    expect(nonce, sent).toMatch(/^'nonce-[A-Za-z0-9+/]{22,}={0,2}'$/);
    expect(script).toContain("'strict-dynamic'");
    // Inline handlers and javascript: URLs stay blocked: nothing lets them in.
    expect(script).not.toContain("'unsafe-inline'");
    expect(script).not.toContain("'unsafe-eval'");
    expect(policy.get("frame-ancestors")).toEqual(["'none'"]);
    expect(policy.get("object-src")).toEqual(["'none'"]);
    expect(policy.get("base-uri")).toEqual(["'self'"]);
    // Next puts the nonce on its scripts from the policy of the request it renders: the same one.
    expect(rendered).toBe(sent);
  });

  it("draws a fresh nonce for every response", async () => {
    const nonces = new Set<string>();
    for (let i = 0; i < 5; i++) nonces.add(policies(await proxy(new NextRequest("http://engram.test/sign-in"))).sent.match(/'nonce-([^']+)'/)![1]!);
    expect(nonces.size).toBe(5);
  });

  it("covers every page, and leaves the API, OAuth and MCP endpoints to their own headers", () => {
    const matches = (url: string) => unstable_doesMiddlewareMatch({ config, url });
    for (const page of ["/", "/hubs", "/hubs/abc/members", "/memories/abc", "/chat", "/api-keys", "/sign-in?callbackUrl=%2Fhubs", "/sign-up", "/link/github", "/invite/tok", "/nowhere"]) {
      expect(matches(page), page).toBe(true);
    }
    for (const endpoint of ["/v1/health", "/v1/memories/abc/attachments/x/download", "/v1/blobs/a/b", "/api/auth/session", "/mcp", "/mcp/chatgpt", "/oauth/authorize", "/.well-known/oauth-authorization-server", "/_next/static/chunks/a.js"]) {
      expect(matches(endpoint), endpoint).toBe(false);
    }
  });
});

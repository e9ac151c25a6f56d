import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consentAt } from "../support/oauth-consent.ts";
import { memax, scratchHome, startEngram, type Engram } from "./support/engram.ts";

// `memax login`, unchanged, against the built server: the CLI prints the URL and waits on its
// loopback port; the test is the browser (sign-up, password sign-in, the consent form, the
// redirect to the CLI); then the stored tokens work, refresh when stale, and create agent keys
// (`memax auth create-key`, and `memax setup --api-key` with Memax's finer grants).

let engram: Engram;
const person = { name: "Lin Login", email: `lin.${Date.now().toString(36)}@example.test`, password: "lin-password-1" };
let cookie: string;

/** Set-Cookie values as one Cookie header (name=value pairs only). */
function cookies(res: Response, jar = ""): string {
  const pairs = res.headers.getSetCookie().map((c) => c.split(";")[0]!);
  return [jar, ...pairs].filter(Boolean).join("; ");
}

/** Signs up through the dashboard's API and signs in with the password, as the sign-in page does. */
async function signIn(): Promise<string> {
  const up = await fetch(`${engram.url}/api/auth/sign-up`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(person) });
  expect(up.status, await up.clone().text()).toBe(201);
  const csrf = await fetch(`${engram.url}/api/auth/csrf`);
  const { csrfToken } = (await csrf.json()) as { csrfToken: string };
  const signedIn = await fetch(`${engram.url}/api/auth/callback/credentials`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: cookies(csrf) },
    body: new URLSearchParams({ email: person.email, password: person.password, csrfToken, json: "true" }),
    redirect: "manual",
  });
  const jar = cookies(signedIn);
  expect(jar, `sign-in answered ${signedIn.status}`).toContain("next-auth.session-token=");
  return jar.split("; ").filter((c) => c.includes("session-token")).join("; ");
}

function credentials(home: string): { access_token: string; refresh_token: string; expires_at: number } {
  return JSON.parse(readFileSync(path.join(home, ".memax", "credentials.json"), "utf8"));
}

/** `memax login` in `home`, with the browser's part done by `browse` once the CLI prints the URL. */
async function login(home: string, browse: (url: string) => Promise<void>, args: string[] = []) {
  let started = false;
  let browsing: Promise<void> = Promise.resolve();
  const run = memax(engram, ["login", ...args], {
    home,
    env: { PATH: "/usr/bin:/bin" },
    onStdout(soFar) {
      const url = soFar.match(/visit:\s+(\S+)/)?.[1];
      if (url && !started) {
        started = true;
        browsing = browse(url);
      }
    },
  });
  const result = await run;
  await browsing;
  return result;
}

beforeAll(async () => {
  engram = await startEngram();
  cookie = await signIn();
});
afterAll(async () => {
  await engram?.stop();
});

describe("memax login", () => {
  it("signs in through the browser, then whoami, list, refresh, create-key and setup's MCP key work with the stored tokens", async () => {
    const home = scratchHome();
    let landed: Response | undefined;
    const result = await login(home, async (url) => {
      expect(url).toMatch(new RegExp(`^${engram.url}/v1/auth/github\\?redirect_uri=http%3A%2F%2Flocalhost%3A\\d+%2Fcallback$`));
      const start = await fetch(url, { redirect: "manual" });
      expect(start.status).toBe(302);
      const callback = await consentAt(engram.url, start.headers.get("location")!, cookie);
      expect(callback.pathname).toBe("/callback");
      // The browser follows the redirect to the CLI, which trades the code and answers the page.
      landed = await fetch(callback);
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Logged in successfully");
    expect(landed?.status).toBe(200);
    expect(await landed!.text()).toContain("Logged in to Memax");
    const stored = credentials(home);
    expect(stored.access_token).toMatch(/^eat_/);
    expect(stored.refresh_token).toMatch(/^ert_/);
    expect(stored.expires_at).toBeGreaterThan(Date.now() + 50 * 60_000);

    const whoami = await memax(engram, ["whoami"], { home });
    expect(whoami.stdout).toContain(`${person.name} (${person.email})`);
    // login picked the personal hub as the active one, from GET /v1/hubs with the new token.
    expect(whoami.stdout).toMatch(/Read hub: {2}\S/);

    const pushed = await fetch(`${engram.url}/v1/memories`, {
      method: "POST",
      headers: { authorization: `Bearer ${stored.access_token}`, "content-type": "application/json" },
      body: JSON.stringify({ title: "Signed in from the CLI", content: "A memory pushed with the CLI's access token." }),
    });
    expect(pushed.status).toBe(201);
    const list = await memax(engram, ["list", "--format", "json"], { home });
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).memories.map((m: { title: string }) => m.title)).toContain("Signed in from the CLI");

    // A stale access token: the CLI refreshes before the call and stores the rotated pair.
    writeFileSync(path.join(home, ".memax", "credentials.json"), JSON.stringify({ ...stored, expires_at: Date.now() - 1000 }));
    const again = await memax(engram, ["whoami"], { home });
    expect(again.stdout).toContain(person.email);
    const rotated = credentials(home);
    expect(rotated.refresh_token).not.toBe(stored.refresh_token);
    expect(rotated.access_token).not.toBe(stored.access_token);
    expect(rotated.expires_at).toBeGreaterThan(Date.now() + 50 * 60_000);

    // The signed-in CLI creates agent keys (the consent page says so).
    const key = await memax(engram, ["auth", "create-key", "laptop-agent"], { home });
    expect(key.stderr).toBe("");
    expect(key.stdout).toContain("API key created successfully");
    const secret = key.stdout.match(/egk_[A-Za-z0-9_-]+/)?.[0];
    expect(secret).toBeDefined();
    const withKey = await fetch(`${engram.url}/v1/auth/me`, { headers: { authorization: `Bearer ${secret}` } });
    expect(((await withKey.json()) as { data: { user: { email: string } } }).data.user.email).toBe(person.email);

    // `memax setup --api-key` makes an MCP key with Memax's finer grants (read, write, delete, organize);
    // a refused key would leave its placeholder in the printed config.
    const setup = await memax(engram, ["setup", "--print", "--api-key", "--allow-delete", "--allow-organize"], { home });
    expect(setup.code).toBe(0);
    expect(setup.stdout).not.toContain("mxk_your_api_key_here");
    expect(setup.stdout).toMatch(/Bearer egk_[A-Za-z0-9_-]+/);
    const keys = await fetch(`${engram.url}/v1/auth/api-keys`, { headers: { authorization: `Bearer ${credentials(home).access_token}` } });
    const mcpKey = ((await keys.json()) as { data: { name: string; scopes: string[]; permissions: string[]; expires_at: string | null }[] }).data.find((k) => k.name === "mcp-setup");
    expect(mcpKey).toMatchObject({ scopes: ["read", "write"], permissions: ["organize", "delete"], expires_at: expect.any(String) });
  });

  it("takes --provider google, and reports a denial without storing anything", async () => {
    const home = scratchHome();
    const result = await login(
      home,
      async (url) => {
        expect(url).toContain("/v1/auth/google?redirect_uri=");
        const start = await fetch(url, { redirect: "manual" });
        const callback = await consentAt(engram.url, start.headers.get("location")!, cookie, { decision: "deny" });
        expect(callback.searchParams.get("error")).toBe("access_denied");
        await fetch(callback);
      },
      ["--provider", "google"],
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("Login failed");
    expect(() => credentials(home)).toThrow();
  });
});

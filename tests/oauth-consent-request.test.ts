import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { MAX_RETURN_TO_CHARS, signInLocation } from "@/lib/auth/sign-in-location.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { startAppServer } from "./support/app-server.ts";
import { loadMemaxSdk } from "./support/memax-sdk.ts";
import { decode, sessionCookieFor } from "./support/oauth-consent.ts";

// GET /oauth/authorize/consent-request (Memax's auth.getOAuthConsentRequest): the pending
// authorization request the consent page renders, as JSON for a front end that renders it itself.
const CALLBACK = "http://127.0.0.1:3598/callback";

let h: Harness;
let server: { url: string; close(): Promise<void> };
let ann: Client;
let bob: Client;
let annCookie: string;
let teamHubId: string;

beforeAll(async () => {
  h = await createHarness();
  await ensureCliClient(h.db);
  server = await startAppServer();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  annCookie = await sessionCookieFor(h.db, ann.id);
  teamHubId = await h.teamHub(bob, [[ann, "viewer"]]);
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

function authorizeUrl(extra: Record<string, string> = {}): string {
  return `${server.url}/oauth/authorize?${new URLSearchParams({ client_id: CLI_CLIENT_ID, redirect_uri: CALLBACK, response_type: "code", state: "s-1", ...extra })}`;
}

/** The consent page as Ann sees it: its request id and consent token (the form's CSRF token). */
async function pending(extra: Record<string, string> = {}): Promise<{ requestId: string; token: string }> {
  const page = await fetch(authorizeUrl(extra), { headers: { cookie: annCookie }, redirect: "manual" });
  expect(page.status).toBe(200);
  const html = await page.text();
  const field = (name: string) => decode(html.match(new RegExp(`<input type="hidden" name="${name}" value="([^"]*)">`))?.[1] ?? "");
  return { requestId: field("request_id"), token: field("csrf") };
}

async function consentRequest(requestId: string, token: string, headers: Record<string, string> = { cookie: annCookie }) {
  const res = await fetch(`${server.url}/oauth/authorize/consent-request?${new URLSearchParams({ request_id: requestId, consent_token: token })}`, { headers });
  return { status: res.status, body: (await res.json()) as { data?: Record<string, any>; error?: { code: string; message: string } } };
}

describe("GET /oauth/authorize/consent-request", () => {
  it("answers the consent page's pending request as Memax's OAuthConsentRequest", async () => {
    const { requestId, token } = await pending({ scope: "read" });
    expect(requestId).not.toBe("");
    const res = await consentRequest(requestId, token);
    expect(res.status).toBe(200);
    const data = res.body.data!;
    expect(Object.keys(data).sort()).toEqual(
      ["session_id", "csrf_token", "client_name", "agent_name", "resource", "submit_url", "expires_at", "hubs", "permissions", "not_requested"].sort(),
    );
    expect(data.session_id).toBe(requestId);
    expect(data.csrf_token).toBe(token);
    expect(data.client_name).toBe("Memax CLI");
    expect(data.agent_name).toBe("Memax CLI");
    expect(data.resource).toBe(`${server.url}/mcp`);
    expect(data.submit_url).toBe(`${server.url}/oauth/authorize`);
    const expires = Date.parse(data.expires_at);
    expect(expires - Date.now()).toBeGreaterThan(14 * 60_000);
    expect(expires - Date.now()).toBeLessThanOrEqual(15 * 60_000);
    // Asked for read only: write is not offered, and says so.
    expect(data.permissions).toEqual([{ value: "read", label: "Read", description: expect.any(String), checked: true, essential: true }]);
    expect(data.not_requested).toEqual(["write"]);
    const hubs = data.hubs as Record<string, unknown>[];
    expect(hubs.map((hub) => hub.id).sort()).toEqual([ann.personalHubId, teamHubId].sort());
    const team = hubs.find((hub) => hub.id === teamHubId)!;
    expect(team).toMatchObject({ role: "viewer", hub_type: "team", memory_count: 0, checked: true, disabled: false, supported_permissions: ["read"] });
    expect(typeof team.name).toBe("string");
    expect(typeof team.slug).toBe("string");
    expect(typeof team.capability_label).toBe("string");
    expect(hubs.find((hub) => hub.id === ann.personalHubId)).toMatchObject({ role: "owner", hub_type: "personal", supported_permissions: ["read", "write"] });
  });

  it("offers write when the client asks for it", async () => {
    const { requestId, token } = await pending();
    const res = await consentRequest(requestId, token);
    expect(res.status).toBe(200);
    expect((res.body.data!.permissions as { value: string }[]).map((p) => p.value)).toEqual(["read", "write"]);
    expect(res.body.data!.not_requested).toEqual([]);
  });

  it("works with an unrestricted API key of the same person", async () => {
    const { requestId, token } = await pending();
    expect((await consentRequest(requestId, token, { authorization: `Bearer ${ann.key}` })).status).toBe(200);
  });

  it("is 401 without a credential, and a not_found that names nothing for another person, a wrong or expired token or an edited request", async () => {
    const { requestId, token } = await pending();
    expect((await consentRequest(requestId, token, {})).status).toBe(401);
    const refusals = [
      await consentRequest(requestId, token, { authorization: `Bearer ${bob.key}` }),
      await consentRequest(requestId, `${token.split(".")[0]}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`),
      await consentRequest(requestId, `${Date.now() - 16 * 60_000}.${token.split(".")[1]}`),
      await consentRequest("bm90LWpzb24", token),
      await consentRequest(requestId.slice(0, -4), token),
      await consentRequest((await pending({ state: "other" })).requestId, token),
    ];
    for (const res of refusals) {
      expect(res.status).toBe(404);
      expect(res.body.error!.code).toBe("not_found");
      expect(res.body.error!.message).toBe("This consent request does not exist or has expired");
    }
    const missing = await fetch(`${server.url}/oauth/authorize/consent-request`, { headers: { cookie: annCookie } });
    expect(missing.status).toBe(400);
  });

  it("is not for a key limited to some hubs, which would learn the account's other hubs", async () => {
    const limited = (await ann.post("/v1/auth/api-keys", { name: "limited", hub_id: ann.personalHubId })).body.data.key as string;
    const { requestId, token } = await pending();
    expect((await consentRequest(requestId, token, { authorization: `Bearer ${limited}` })).status).toBe(403);
  });
});

describe("the consent request's submit_url", () => {
  it("takes the answer a front end posts with session_id and csrf_token, as the consent page's own form", async () => {
    const { requestId, token } = await pending();
    const { data } = (await consentRequest(requestId, token)).body;
    const form = new URLSearchParams({ session_id: data!.session_id, csrf_token: data!.csrf_token, decision: "allow", hubs: "selected", hub_ids: ann.personalHubId, access: "read" });
    const res = await fetch(data!.submit_url, { method: "POST", headers: { cookie: annCookie, origin: server.url, "content-type": "application/x-www-form-urlencoded" }, body: form, redirect: "manual" });
    expect(res.status, await res.clone().text()).toBe(303);
    const callback = new URL(res.headers.get("location")!);
    expect(callback.origin + callback.pathname).toBe(CALLBACK);
    expect(callback.searchParams.get("state")).toBe("s-1");
    const code = callback.searchParams.get("code")!;
    const tokens = await fetch(`${server.url}/v1/auth/exchange`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ code }) });
    expect(tokens.status).toBe(200);
    expect(((await tokens.json()) as { data: { scope: string } }).data.scope).toBe("read");
  });
});

/** The request id with one authorization field set to another value, as a front end could edit it. */
function edited(requestId: string, name: string, value: string): string {
  const fields = (JSON.parse(Buffer.from(requestId, "base64url").toString("utf8")) as [string, string][]).filter(([field]) => field !== name);
  return Buffer.from(JSON.stringify([...fields, [name, value]])).toString("base64url");
}

async function submit(form: Record<string, string>) {
  return fetch(`${server.url}/oauth/authorize`, {
    method: "POST",
    headers: { cookie: annCookie, origin: server.url, "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form),
    redirect: "manual",
  });
}

describe("a consent completed from the consent request's JSON alone", () => {
  it("posts the ticked hubs' ids and the ticked permissions' values, and the grant is exactly those", async () => {
    const { requestId, token } = await pending();
    const { data } = (await consentRequest(requestId, token)).body;
    // A front end renders the JSON: Ann unticks the team hub, keeps every permission, and allows.
    const hubs = (data!.hubs as { id: string; checked: boolean }[]).map((hub) => ({ ...hub, checked: hub.id !== teamHubId }));
    const form = new URLSearchParams({ session_id: data!.session_id, csrf_token: data!.csrf_token, decision: "allow" });
    for (const hub of hubs) if (hub.checked) form.append("hub_ids", hub.id);
    for (const permission of data!.permissions as { value: string; checked: boolean }[]) if (permission.checked) form.append("permissions", permission.value);
    const res = await fetch(data!.submit_url, { method: "POST", headers: { cookie: annCookie, origin: server.url, "content-type": "application/x-www-form-urlencoded" }, body: form, redirect: "manual" });
    expect(res.status, await res.clone().text()).toBe(303);
    const code = new URL(res.headers.get("location")!).searchParams.get("code")!;
    const tokens = await fetch(`${server.url}/v1/auth/exchange`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ code }) });
    expect(tokens.status).toBe(200);
    expect(((await tokens.json()) as { data: { scope: string } }).data.scope).toBe("read write");
    const grant = (await ann.get("/v1/auth/oauth-grants")).body.data.grants[0];
    expect(grant).toMatchObject({ hub_ids: [ann.personalHubId], all_hubs: false, scopes: ["read", "write"] });
  });
});

describe("a consent form submitted again", () => {
  it("is refused with a clear answer: one form makes one grant, however often (or at once) it is posted within its life", async () => {
    const grants = () => h.db.oAuthGrant.count({ where: { userId: ann.id, revokedAt: null } });
    const { requestId, token } = await pending();
    const form = { session_id: requestId, csrf_token: token, decision: "allow", hubs: "all", access: "write" };
    const before = await grants();
    const first = await submit(form);
    expect(first.status, await first.clone().text()).toBe(303);
    expect(new URL(first.headers.get("location")!).searchParams.get("code")).toBeTruthy();
    const again = await submit(form);
    expect(again.status).toBe(410);
    expect(await again.text()).toMatch(/already (been )?(submitted|used)/i);
    // Nor is a deny taken from it: the app has its code, and must not be told access_denied after it.
    expect((await submit({ ...form, decision: "deny" })).status).toBe(410);
    // Nor does the consent request offer a form that can no longer be answered.
    expect((await consentRequest(requestId, token)).status).toBe(404);
    // Posted several times at once: one grant.
    const fresh = await pending();
    const racing = await Promise.all(Array.from({ length: 4 }, () => submit({ ...form, session_id: fresh.requestId, csrf_token: fresh.token })));
    expect(racing.map((res) => res.status).sort()).toEqual([303, 410, 410, 410]);
    expect(await grants()).toBe(before + 2);
  });

  it("a deny uses the form up too: an allow of the same form after it (the back button, a replay) makes no grant and sends the app no code", async () => {
    const grants = () => h.db.oAuthGrant.count({ where: { userId: ann.id } });
    const { requestId, token } = await pending();
    const form = { session_id: requestId, csrf_token: token, decision: "deny", hubs: "all", access: "write" };
    const before = await grants();
    const denied = await submit(form);
    expect(denied.status).toBe(303);
    expect(new URL(denied.headers.get("location")!).searchParams.get("error")).toBe("access_denied");
    const allowed = await submit({ ...form, decision: "allow" });
    expect(allowed.status, allowed.headers.get("location") ?? "").toBe(410);
    expect(await allowed.text()).toMatch(/already (been )?(submitted|used)/i);
    expect((await submit(form)).status).toBe(410);
    expect((await consentRequest(requestId, token)).status).toBe(404);
    expect(await grants()).toBe(before);
    // A deny and an allow posted at once: one answer reaches the app, the other is refused.
    const fresh = await pending();
    const racing = await Promise.all(["deny", "allow", "deny", "allow"].map((decision) => submit({ ...form, decision, session_id: fresh.requestId, csrf_token: fresh.token })));
    expect(racing.map((res) => res.status).sort()).toEqual([303, 410, 410, 410]);
  });
});

describe("a request id edited in any of its fields", () => {
  it("is one 404, and its submission is refused, for scope, response_type and code_challenge_method too", async () => {
    const { requestId, token } = await pending({ scope: "read" });
    for (const [name, value] of [["scope", "write"], ["response_type", "token"], ["code_challenge_method", "plain"], ["state", "s-2"]]) {
      const changed = edited(requestId, name!, value!);
      const res = await consentRequest(changed, token);
      expect(res.status, `${name}=${value}`).toBe(404);
      const submitted = await submit({ session_id: changed, csrf_token: token, decision: "allow", hubs: "all", access: "write" });
      expect(submitted.status, `${name}=${value}`).toBe(403);
    }
    // The page's own form, its scope field widened, is refused as well.
    const widened = await submit({ client_id: CLI_CLIENT_ID, redirect_uri: CALLBACK, response_type: "code", state: "s-1", scope: "read write", csrf: token, decision: "allow", hubs: "all", access: "write" });
    expect(widened.status).toBe(403);
    // Unedited, it still goes through.
    expect((await consentRequest(requestId, token)).status).toBe(200);
  });
});

describe("a long authorization request", () => {
  it("gets a request id the consent request answers, up to the bound; past it the authorize request is refused up front", async () => {
    const { requestId, token } = await pending({ state: "s".repeat(8000) });
    expect((await consentRequest(requestId, token)).status).toBe(200);
    // An authorize URL that fits a request line but whose request id would not fit the consent request's.
    const long = await fetch(authorizeUrl({ state: "s".repeat(12_000) }), { headers: { cookie: annCookie }, redirect: "manual" });
    expect(long.status).toBe(302);
    const callback = new URL(long.headers.get("location")!);
    expect(callback.origin + callback.pathname).toBe(CALLBACK);
    expect(callback.searchParams.get("error")).toBe("invalid_request");
    expect(callback.searchParams.get("error_description")).toMatch(/too long/);
  });
});

describe("an authorization request sent through sign-in", () => {
  it("carries its return-to while it fits the documented bound; past it the client is told at once, not sent a Location no browser or server takes", async () => {
    // Within the bound: the sign-in page, with the request to come back to.
    const short = await fetch(authorizeUrl({ state: "é".repeat(300) }), { redirect: "manual" });
    expect(short.status).toBe(302);
    const signIn = new URL(short.headers.get("location")!, server.url);
    expect(signIn.pathname).toBe("/sign-in");
    expect(new URL(signIn.searchParams.get("callbackUrl")!, server.url).searchParams.get("state")).toBe("é".repeat(300));
    expect(encodeURIComponent(signIn.searchParams.get("callbackUrl")!).length).toBeLessThanOrEqual(MAX_RETURN_TO_CHARS);
    // ~15 KiB of percent-escapes: a request line Node takes, a request id within its bound, but a
    // return-to escaped once more (~25 KiB) that overflowed every header limit on the way.
    const long = await fetch(authorizeUrl({ state: "é".repeat(2500) }), { redirect: "manual" });
    expect(long.status).toBe(302);
    const location = long.headers.get("location")!;
    // The error carries the state back (RFC 6749 §4.1.2.1), no longer than the client sent it.
    expect(location.length).toBeLessThan(16 * 1024);
    const callback = new URL(location);
    expect(callback.origin + callback.pathname).toBe(CALLBACK);
    expect(callback.searchParams.get("error")).toBe("invalid_request");
    expect(callback.searchParams.get("error_description")).toMatch(/too long to carry through sign-in/);
    // Signed in, the same request needs no return-to and is shown.
    expect((await fetch(authorizeUrl({ state: "é".repeat(2500) }), { headers: { cookie: annCookie }, redirect: "manual" })).status).toBe(200);
  });
});

describe("the longest return-to sign-in takes", () => {
  it("survives a provider's round trip: next-auth keeps it in a cookie, which a browser drops past 4096 bytes", async () => {
    // The longest return-to signInLocation lets through, as the sign-in page hands it to next-auth.
    const head = "/oauth/authorize?state=";
    const returnTo = head + "s".repeat(MAX_RETURN_TO_CHARS - encodeURIComponent(head).length);
    const location = signInLocation(returnTo);
    expect(location).not.toBeNull();
    const callbackUrl = new URL(location!, "http://engram.test").searchParams.get("callbackUrl")!;
    expect(callbackUrl).toBe(returnTo);
    // next-auth's own handler as the route runs it (its package exports no ./core), and the cookie
    // written as its route writes it (next/utils.js: the `cookie` package's serialize).
    const load = createRequire(import.meta.url);
    const { AuthHandler } = load(join(dirname(load.resolve("next-auth")), "core", "index.js")) as {
      AuthHandler(params: { req: Request; options: unknown }): Promise<{ cookies?: { name: string; value: string; options: object }[] }>;
    };
    const { serialize } = createRequire(load.resolve("next-auth"))("cookie") as { serialize(name: string, value: string, options?: object): string };
    const req = new Request(`http://engram.test/api/auth/csrf?${new URLSearchParams({ callbackUrl })}`, { headers: { host: "engram.test" } });
    const res = await AuthHandler({ req, options: await sessionOptions(h.db) });
    const set = (res.cookies ?? []).find((c) => c.name.endsWith("next-auth.callback-url"));
    expect(set).toBeDefined();
    const cookie = serialize(set!.name, set!.value, set!.options);
    // A browser keeps a cookie whose name and value are at most 4096 bytes (RFC 6265 §6.1's minimum, Chrome's and Firefox's maximum).
    expect(Buffer.byteLength(cookie!.split(";")[0]!)).toBeLessThanOrEqual(4096);
  });
});

describe("a client whose metadata document cannot be re-fetched", () => {
  it("is a clear 503 saying so, as the authorize page answers it, not a not_found", async () => {
    let up = true;
    const metadata = createServer((req, res) => {
      if (!up) return void res.writeHead(500).end("down");
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ client_id: clientId, client_name: "Doc Client", redirect_uris: [CALLBACK], token_endpoint_auth_method: "none" }));
    });
    await new Promise<void>((resolve) => metadata.listen(0, "127.0.0.1", resolve));
    const clientId = `http://127.0.0.1:${(metadata.address() as AddressInfo).port}/client.json`;
    process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA = "1";
    try {
      const request = { client_id: clientId, code_challenge: "c".repeat(43), code_challenge_method: "S256" };
      const { requestId, token } = await pending(request);
      expect((await consentRequest(requestId, token)).status).toBe(200);
      // A day later the document is due to be read again, and its server is failing.
      await h.db.oAuthClient.update({ where: { id: clientId }, data: { fetchedAt: new Date(Date.now() - 25 * 3600_000) } });
      up = false;
      const res = await consentRequest(requestId, token);
      expect(res.status).toBe(503);
      expect(res.body.error!.code).toBe("unavailable");
      expect(res.body.error!.message).toMatch(/metadata document could not be fetched again.*HTTP 500/);
      // The authorize page in the same case: a page that says to try again later, with the same status.
      const page = await fetch(authorizeUrl(request), { headers: { cookie: annCookie }, redirect: "manual" });
      expect(page.status).toBe(503);
      expect(await page.text()).toMatch(/Try again later[\s\S]*metadata document could not be fetched again/);
      // Once its server answers again, so does the consent request.
      up = true;
      expect((await consentRequest(requestId, token)).status).toBe(200);
    } finally {
      delete process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA;
      await new Promise((resolve) => metadata.close(resolve));
    }
  });
});

describe("a client whose metadata document moved, grew or whose server is gone", () => {
  it("a redirect or an oversized document is an unknown client (404), not an outage to retry forever; a refused connection is an outage (503)", async () => {
    let mode: "up" | "moved" | "big" = "up";
    const doc = () => JSON.stringify({ client_id: clientId, client_name: "Moving Client", redirect_uris: [CALLBACK], token_endpoint_auth_method: "none" });
    const metadata = createServer((req, res) => {
      if (mode === "moved") return void res.writeHead(301, { location: "https://elsewhere.example/client.json" }).end();
      if (mode === "big") return void res.writeHead(200, { "content-type": "application/json" }).end(" ".repeat(70 * 1024) + doc());
      res.writeHead(200, { "content-type": "application/json" }).end(doc());
    });
    await new Promise<void>((resolve) => metadata.listen(0, "127.0.0.1", resolve));
    const clientId = `http://127.0.0.1:${(metadata.address() as AddressInfo).port}/moving.json`;
    process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA = "1";
    const due = () => h.db.oAuthClient.update({ where: { id: clientId }, data: { fetchedAt: new Date(Date.now() - 25 * 3600_000) } });
    try {
      const request = { client_id: clientId, code_challenge: "c".repeat(43), code_challenge_method: "S256" };
      const { requestId, token } = await pending(request);
      expect((await consentRequest(requestId, token)).status).toBe(200);
      for (const gone of ["moved", "big"] as const) {
        await due();
        mode = gone;
        expect((await consentRequest(requestId, token)).status, gone).toBe(404);
      }
      // Its server not listening at all: down, so an outage.
      await due();
      await new Promise((resolve) => metadata.close(resolve));
      const down = await consentRequest(requestId, token);
      expect(down.status).toBe(503);
      expect(down.body.error!.code).toBe("unavailable");
    } finally {
      delete process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA;
      if (metadata.listening) await new Promise((resolve) => metadata.close(resolve));
    }
  });
});

describe("Memax's SDK", () => {
  it("auth.getOAuthConsentRequest reads it, and a wrong token is the SDK's not-found error", async () => {
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: server.url, apiKey: ann.key, maxRetries: 0 });
    const { requestId, token } = await pending({ scope: "read" });
    const request = await sdk.auth.getOAuthConsentRequest(requestId, token);
    expect(request).toMatchObject({ session_id: requestId, csrf_token: token, client_name: "Memax CLI", not_requested: ["write"] });
    expect(request.hubs.map((hub: { id: string }) => hub.id).sort()).toEqual([ann.personalHubId, teamHubId].sort());
    await expect(sdk.auth.getOAuthConsentRequest(requestId, `${Date.now()}.AAAA`)).rejects.toMatchObject({ status: 404 });
  });
});

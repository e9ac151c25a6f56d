import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { ApiError } from "@/lib/api/errors.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { approveConsent } from "@/lib/oauth/approve-consent.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { authorizeErrorPage } from "@/lib/oauth/authorize-flow.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { createHarness, HARNESS_LIMITS, type Harness } from "./support/harness.ts";
import { decode, sessionCookieFor } from "./support/oauth-consent.ts";
import { routerFor } from "./support/router.ts";

/**
 * Every error of an OAuth endpoint is RFC 6749 §5.2 JSON `{error, error_description}` with the
 * status that tells the client what to do: a refusal it caused is a 4xx, not a 500 server_error.
 */
let h: Harness;
const oauth = routerFor(["oauth"]);

beforeAll(async () => {
  h = await createHarness();
  await ensureCliClient(h.db);
});
afterAll(() => h.close());

async function refreshToken(name: string): Promise<string> {
  const user = await h.user(name);
  const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
  const code = await approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date());
  const res = await h.anonymous.post("/v1/auth/exchange", { code });
  expect(res.status, res.text).toBe(200);
  return res.body.data.refresh_token as string;
}

async function tokenEndpoint(params: Record<string, string>) {
  const res = await oauth(new Request("http://engram.test/oauth/token", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(params) }));
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, string> };
}

/** Every insert into oauth_refresh_tokens fails with `sqlState` while `work` runs: a real trigger, nothing mocked. */
async function withRefreshInsertsFailing<T>(sqlState: string, work: () => Promise<T>): Promise<T> {
  await h.db.$executeRawUnsafe(`CREATE FUNCTION refuse_refresh_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '${sqlState}'; END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER refuse_refresh_insert BEFORE INSERT ON oauth_refresh_tokens FOR EACH ROW EXECUTE FUNCTION refuse_refresh_insert()`);
  try {
    return await work();
  } finally {
    await h.db.$executeRawUnsafe(`DROP TRIGGER refuse_refresh_insert ON oauth_refresh_tokens`);
    await h.db.$executeRawUnsafe(`DROP FUNCTION refuse_refresh_insert()`);
  }
}

describe("an ApiError raised inside /oauth/token", () => {
  it("the grant gone mid-exchange (a foreign-key violation) is 400 invalid_grant, not 500 server_error", async () => {
    const token = await refreshToken("GoneGrant");
    const res = await withRefreshInsertsFailing("23503", () => tokenEndpoint({ grant_type: "refresh_token", refresh_token: token, client_id: CLI_CLIENT_ID }));
    expect([res.status, res.body.error], JSON.stringify(res.body)).toEqual([400, "invalid_grant"]);
    expect(res.body.error_description).toMatch(/deleted/);
  });

  it("a write colliding with a concurrent one (a unique violation) is 503 temporarily_unavailable with Retry-After", async () => {
    const token = await refreshToken("Collision");
    const res = await withRefreshInsertsFailing("23505", () => tokenEndpoint({ grant_type: "refresh_token", refresh_token: token, client_id: CLI_CLIENT_ID }));
    expect([res.status, res.body.error], JSON.stringify(res.body)).toEqual([503, "temporarily_unavailable"]);
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    // Nothing was spent: the retry it was told to make succeeds.
    expect((await tokenEndpoint({ grant_type: "refresh_token", refresh_token: token, client_id: CLI_CLIENT_ID })).status).toBe(200);
  });
});

describe("the per-address rate limit of the OAuth endpoints", () => {
  const form = { "content-type": "application/x-www-form-urlencoded" };
  const requests: [string, () => Request][] = [
    ["/oauth/token", () => new Request("http://engram.test/oauth/token", { method: "POST", headers: form, body: "grant_type=refresh_token&refresh_token=ert_x&client_id=c" })],
    ["/oauth/revoke", () => new Request("http://engram.test/oauth/revoke", { method: "POST", headers: form, body: "token=ert_x" })],
    [
      "/oauth/register",
      () => new Request("http://engram.test/oauth/register", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ redirect_uris: ["https://c.example/cb"] }) }),
    ],
  ];

  it.each(requests)("%s answers its 429 in RFC 6749's shape with Retry-After, as its other errors", async (path, request) => {
    setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS, light: 1 }));
    try {
      await oauth(request());
      const res = await oauth(request());
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(res.headers.get("x-ratelimit-remaining")).toBe("0");
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      const body = await res.json();
      expect(body, path).toEqual({ error: "temporarily_unavailable", error_description: expect.stringMatching(/Rate limit/) });
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });

  it("/oauth/authorize, a page the user sees, answers its 429 as the page its other refusals are, with Retry-After", async () => {
    setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS, light: 1 }));
    try {
      const url = `http://engram.test/oauth/authorize?${new URLSearchParams({ client_id: "ec_unknown", response_type: "code" })}`;
      const first = await oauth(new Request(url));
      expect(first.headers.get("content-type")).toContain("text/html");
      const res = await oauth(new Request(url));
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(res.headers.get("content-type")).toContain("text/html");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(await res.text()).toContain("Rate limit");
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });
});

describe("POST /oauth/revoke", () => {
  const revoke = (body: string) => oauth(new Request("http://engram.test/oauth/revoke", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body }));

  it("without a token is 400 invalid_request (RFC 7009 §2.1: token is required), not a 200 that revoked nothing", async () => {
    for (const body of ["", "token=", "client_id=memax-cli"]) {
      const res = await revoke(body);
      expect(res.status, body).toBe(400);
      expect(await res.json()).toEqual({ error: "invalid_request", error_description: expect.stringMatching(/token/) });
    }
  });

  it("with a refresh token of the client ends its grant; an unknown token or another client's is answered 200 alike", async () => {
    const token = await refreshToken("Revoker");
    const grant = await h.db.oAuthGrant.findFirstOrThrow({ where: { user: { name: "Revoker" } } });
    expect((await revoke(new URLSearchParams({ token: "ert_unknown" }).toString())).status).toBe(200);
    expect((await revoke(new URLSearchParams({ token, client_id: "ec_other" }).toString())).status).toBe(200);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grant.id } })).revokedAt).toBeNull();
    expect((await revoke(new URLSearchParams({ token, client_id: CLI_CLIENT_ID }).toString())).status).toBe(200);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grant.id } })).revokedReason).toBe("revoked_by_client");
  });
});

describe("an error inside the consent's submit, once the redirect URI is verified", () => {
  const REDIRECT = "https://c.example/cb";

  /** The consent form as the page served it to a signed-in user, allowed, and where its submit sends the browser. */
  async function submitConsent(name: string, failing: string): Promise<Response> {
    const user = await h.user(name);
    const clientId = `ec_submit_${name}`;
    await h.db.oAuthClient.create({ data: { id: clientId, name: "Submit", redirectUris: [REDIRECT], kind: "registered" } });
    const cookie = await sessionCookieFor(h.db, user.id);
    const challenge = createHash("sha256").update("v".repeat(43)).digest("base64url");
    const query = new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_type: "code", code_challenge: challenge, code_challenge_method: "S256", state: "st-9" });
    const page = await oauth(new Request(`http://engram.test/oauth/authorize?${query}`, { headers: { cookie } }));
    expect(page.status).toBe(200);
    const form = new URLSearchParams();
    for (const [, field, value] of (await page.text()).matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.append(field!, decode(value!));
    form.set("decision", "allow");
    form.set("hubs", "all");
    form.set("access", "write");
    // A real trigger on the test database makes the grant's insert fail as `failing` says, nothing mocked.
    await h.db.$executeRawUnsafe(`CREATE FUNCTION fail_grant_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${failing} END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER fail_grant_insert BEFORE INSERT ON oauth_grants FOR EACH ROW EXECUTE FUNCTION fail_grant_insert()`);
    try {
      return await oauth(
        new Request("http://engram.test/oauth/authorize", { method: "POST", headers: { cookie, origin: "http://engram.test", "content-type": "application/x-www-form-urlencoded" }, body: form }),
      );
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER fail_grant_insert ON oauth_grants`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION fail_grant_insert()`);
    }
  }

  function redirectedError(res: Response) {
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
    return Object.fromEntries(location.searchParams);
  }

  // RFC 6749 §4.1.2.1, and docs/mcp.md: every error after the redirect URI is verified goes back to
  // the client, with state and iss. These rendered an HTML page, and the app waited for a callback that never came.
  it("a database too busy (a deadlock broken) sends temporarily_unavailable back to the client", async () => {
    const res = await submitConsent("BusyConsent", "RAISE EXCEPTION 'refused by the test' USING ERRCODE = '40P01';");
    expect(redirectedError(res)).toEqual({ error: "temporarily_unavailable", error_description: expect.any(String), state: "st-9", iss: "http://engram.test" });
  });

  it("the client deleted while the user consented (the unused-clients prune) sends an error back, not a page", async () => {
    const res = await submitConsent("PrunedConsent", "DELETE FROM oauth_clients WHERE id = NEW.client_id; RETURN NEW;");
    expect(redirectedError(res)).toEqual({ error: "invalid_request", error_description: expect.stringMatching(/deleted/), state: "st-9", iss: "http://engram.test" });
  });

  it("an unexpected failure sends server_error back, with no internal detail", async () => {
    const res = await submitConsent("BrokenConsent", "RAISE EXCEPTION 'secret internals';");
    const error = redirectedError(res);
    expect(error).toMatchObject({ error: "server_error", state: "st-9", iss: "http://engram.test" });
    expect(error.error_description).not.toMatch(/secret internals/);
  });
});

describe("an error after GET /oauth/authorize verified the redirect URI", () => {
  // docs/mcp.md: every error after the redirect URI is verified goes back to it. Reading the user's
  // hubs for the consent page failed into the wrapper's page, and the app never heard of it.
  it("sends server_error back to the client, with state and iss", async () => {
    const user = await h.user("ShowFails");
    const clientId = "ec_show_fails";
    await h.db.oAuthClient.create({ data: { id: clientId, name: "Show", redirectUris: ["https://c.example/cb"], kind: "registered" } });
    const cookie = await sessionCookieFor(h.db, user.id);
    const challenge = createHash("sha256").update("v".repeat(43)).digest("base64url");
    const query = new URLSearchParams({ client_id: clientId, redirect_uri: "https://c.example/cb", response_type: "code", code_challenge: challenge, code_challenge_method: "S256", state: "st-7" });
    // The memberships' table gone for the moment: a real failure of the page's read, nothing mocked.
    await h.db.$executeRawUnsafe(`ALTER TABLE hub_members RENAME TO hub_members_hidden`);
    let res: Response;
    try {
      res = await oauth(new Request(`http://engram.test/oauth/authorize?${query}`, { headers: { cookie } }));
    } finally {
      await h.db.$executeRawUnsafe(`ALTER TABLE hub_members_hidden RENAME TO hub_members`);
    }
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe("https://c.example/cb");
    expect(Object.fromEntries(location.searchParams)).toEqual({ error: "server_error", error_description: "Internal error", state: "st-7", iss: "http://engram.test" });
  });
});

describe("the /oauth/authorize page for an error its wrapper answers", () => {
  // A refusal with its own status (a body over the limit, a content type) was shown as a plain 400.
  it("keeps a 413's and a 415's status", () => {
    expect(authorizeErrorPage(new ApiError("body_too_large", "Request body exceeds 65536 bytes")).status).toBe(413);
    expect(authorizeErrorPage(new ApiError("unsupported_content_type", "Send a form")).status).toBe(415);
    expect(authorizeErrorPage(new ApiError("invalid_request", "Bad")).status).toBe(400);
  });
});

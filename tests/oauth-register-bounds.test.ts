import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { newId } from "@/lib/ids.ts";
import { pruneExpiredOAuthTokens } from "@/lib/oauth/prune-expired-tokens.ts";
import { pruneUnusedOAuthClients } from "@/lib/oauth/prune-unused-clients.ts";
import { createHarness, HARNESS_LIMITS, type Harness } from "./support/harness.ts";
import { routerFor } from "./support/router.ts";

const dispatch = routerFor(["oauth"]);
const HOUR = 60 * 60_000;
let h: Harness;

// Picked by the system when the metadata server listens (port 0): a fixed one failed the run whenever something else held it.
let metadataPort = 0;
let metadataServer: Server;
let metadataHits = 0;

beforeAll(async () => {
  h = await createHarness();
  // Client ID metadata documents on loopback http (allowed for loopback only with this switch): any path serves a valid
  // document naming itself; "evil" in the path puts control characters in its name and URI.
  process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA = "1";
  metadataServer = createServer((req, res) => {
    metadataHits += 1;
    const evil = req.url!.includes("evil");
    // "lone": JSON escapes of half a surrogate pair ("\ud800"), which no UTF-8 text can hold.
    const lone = req.url!.includes("lone");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        client_id: `http://127.0.0.1:${metadataPort}${req.url}`,
        client_name: evil ? "Evil\u0000\nDoc" : lone ? "Lone \ud800 Doc" : "Doc",
        client_uri: evil ? "https://c.example/\u0000" : lone ? "https://c.example/\udc00" : "https://c.example/",
        redirect_uris: lone ? ["https://c.example/cb\ud800"] : ["https://c.example/cb", "https://c.example/cb"],
      }),
    );
  });
  await new Promise<void>((resolve) => metadataServer.listen(0, "127.0.0.1", resolve));
  metadataPort = (metadataServer.address() as AddressInfo).port;
});
afterAll(async () => {
  delete process.env.ENGRAM_OAUTH_ALLOW_HTTP_METADATA;
  await new Promise<void>((resolve) => metadataServer?.close(() => resolve()));
  await h.close();
});
afterEach(async () => {
  delete process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR;
  delete process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR;
  await h.db.oAuthClient.deleteMany({});
});

/** A token request naming `clientId`: the client is looked up (a metadata document fetched) before the code is. */
async function tokenFor(clientId: string, from?: string) {
  const res = await dispatch(
    new Request("http://engram.test/oauth/token", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...(from && { "x-engram-socket-address": from }) },
      body: new URLSearchParams({ grant_type: "authorization_code", code: "eac_x", client_id: clientId, code_verifier: "v".repeat(43) }),
    }),
  );
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

const docUrl = (path: string) => `http://127.0.0.1:${metadataPort}/${path}`;

const BULK = { client_name: "Bulk", redirect_uris: Array.from({ length: 10 }, (_, i) => `https://c.example/${"x".repeat(1400)}/${i}`) };

async function register(metadata: Record<string, unknown> = BULK, from?: string) {
  // The TCP peer's address, as scripts/server.mjs hands it on (lib/api/client-address.ts).
  const headers: Record<string, string> = { "content-type": "application/json", ...(from && { "x-engram-socket-address": from }) };
  const res = await dispatch(new Request("http://engram.test/oauth/register", { method: "POST", headers, body: JSON.stringify(metadata) }));
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, string> };
}

async function grantFor(clientId: string) {
  const ann = await h.user("Ann");
  await h.db.oAuthGrant.create({ data: { id: newId(), userId: ann.id, clientId, hubIds: [], allHubs: true, scope: "read", resource: "http://engram.test/mcp" } });
}

describe("dynamic client registration bounds", () => {
  it("holds each address to its own hourly cap, so one caller cannot use up everyone's room (an IPv6 /64 counts as one)", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR = "2";
    for (const from of ["203.0.113.7", "203.0.113.7"]) expect((await register(BULK, from)).status).toBe(201);
    const refused = await register(BULK, "203.0.113.7");
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe("temporarily_unavailable");
    expect(refused.body.error_description).toMatch(/your address/);
    // Another address still registers: the global cap (1000 by default) is far off.
    expect((await register(BULK, "198.51.100.9")).status).toBe(201);
    // Two addresses of one /64 are one caller; another /64 is not.
    expect((await register(BULK, "2001:db8:1:2::1")).status).toBe(201);
    expect((await register(BULK, "2001:0db8:0001:0002:ffff::9")).status).toBe(201);
    expect((await register(BULK, "2001:db8:1:2:aaaa:bbbb:cccc:dddd")).status).toBe(429);
    expect((await register(BULK, "2001:db8:1:3::1")).status).toBe(201);
    // New metadata documents named at /oauth/token count for the address too (with its registrations).
    expect((await tokenFor(docUrl("per-address-a.json"), "198.51.100.9")).status).toBe(400);
    expect((await tokenFor(docUrl("per-address-b.json"), "198.51.100.9")).body.error).toBe("temporarily_unavailable");
    // A server that cannot tell callers apart (no address) does not lump them into one budget.
    for (let i = 0; i < 3; i++) expect((await register()).status).toBe(201);
    expect(await h.db.oAuthClient.groupBy({ by: ["createdFrom"], _count: true, orderBy: { createdFrom: "asc" } })).toEqual([
      { createdFrom: "198.51.100.9", _count: 2 },
      { createdFrom: "2001:db8:1:2::/64", _count: 2 },
      { createdFrom: "2001:db8:1:3::/64", _count: 1 },
      { createdFrom: "203.0.113.7", _count: 2 },
      { createdFrom: null, _count: 3 },
    ]);
  });

  it("refuses registrations past the hourly cap of never-used clients, counting neither used nor older clients", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "3";
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await register();
      expect(res.status).toBe(201);
      ids.push(res.body.client_id!);
    }
    const refused = await register();
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe("temporarily_unavailable");
    expect(await h.db.oAuthClient.count()).toBe(3);

    // A client someone consented to is no longer counted against the cap.
    await grantFor(ids[0]!);
    expect((await register()).status).toBe(201);
    expect((await register()).status).toBe(429);

    // Nor is one registered over an hour ago.
    await h.db.oAuthClient.update({ where: { id: ids[1]! }, data: { createdAt: new Date(Date.now() - 2 * HOUR) } });
    expect((await register()).status).toBe(201);
  });

  it("says on a refusal, in Retry-After, how many seconds until the oldest counted client stops counting", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "2";
    const first = await register();
    await register();
    // The oldest frees its place 10 minutes from now; a later one would not free one before it.
    await h.db.oAuthClient.update({ where: { id: first.body.client_id! }, data: { createdAt: new Date(Date.now() - 50 * 60_000) } });
    const refused = await register();
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(595);
    expect(retryAfter).toBeLessThanOrEqual(600);
    // The same refusal at /oauth/token, for a metadata document named there for the first time.
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR = "1";
    delete process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR;
    expect((await register(BULK, "192.0.2.44")).status).toBe(201);
    const res = await dispatch(
      new Request("http://engram.test/oauth/token", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", "x-engram-socket-address": "192.0.2.44" },
        body: new URLSearchParams({ grant_type: "authorization_code", code: "eac_x", client_id: docUrl("retry-after.json"), code_verifier: "v".repeat(43) }),
      }),
    );
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(3590);
  });

  // Browser MCP clients call these cross-origin: a header not in Access-Control-Expose-Headers is hidden from
  // them, so the 429's Retry-After was unreadable; and the per-address limit's 429 carried no CORS at all.
  it("lets a browser client read a refusal's Retry-After, including the per-address request limit's", async () => {
    const exposed = (res: { headers: Headers }) => (res.headers.get("access-control-expose-headers") ?? "").split(/,\s*/).map((name) => name.toLowerCase());
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "1";
    await register();
    const refused = await register();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(refused.headers.get("access-control-allow-origin")).toBe("*");
    expect(exposed(refused)).toEqual(expect.arrayContaining(["retry-after", "www-authenticate", "x-request-id", "x-ratelimit-remaining"]));
    setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS, light: 1 }));
    try {
      await tokenFor("unknown-client", "192.0.2.77");
      const limited = await dispatch(
        new Request("http://engram.test/oauth/token", {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", "x-engram-socket-address": "192.0.2.77" },
          body: new URLSearchParams({ grant_type: "authorization_code", code: "eac_x", client_id: "unknown-client", code_verifier: "v".repeat(43) }),
        }),
      );
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(limited.headers.get("access-control-allow-origin")).toBe("*");
      expect(exposed(limited)).toContain("retry-after");
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });

  it("prunes clients that never obtained a grant after a day, keeping used, recent and built-in ones", async () => {
    const old = new Date(Date.now() - 25 * HOUR);
    const client = (id: string, kind: string, createdAt: Date) => ({ id, name: id, redirectUris: ["https://c.example/cb"], kind, createdAt });
    await h.db.oAuthClient.createMany({
      data: [
        client("ec_old_unused", "registered", old),
        client("ec_old_used", "registered", old),
        client("ec_recent_unused", "registered", new Date(Date.now() - HOUR)),
        client("https://doc.example/client.json", "metadata_document", old),
        client("memax-cli", "builtin", old),
      ],
    });
    await grantFor("ec_old_used");
    expect(await pruneUnusedOAuthClients(h.database)).toBe(2);
    const left = (await h.db.oAuthClient.findMany({ select: { id: true }, orderBy: { id: "asc" } })).map((row) => row.id);
    expect(left).toEqual(["ec_old_used", "ec_recent_unused", "memax-cli"]);
  });

  it("metadata with a NUL or other control characters is refused or cleaned, never a 500", async () => {
    for (const uri of ["https://c.example/c\u0000b", "cursor://x/\u0000", "https://c.example/a b", "https://c.example/\n"]) {
      const res = await register({ redirect_uris: [uri] });
      expect(res.status, JSON.stringify(uri)).toBe(400);
      expect(res.body.error).toBe("invalid_redirect_uri");
    }
    const named = await register({ client_name: "Evil\u0000\nApp", client_uri: "https://c.example/\u0000", redirect_uris: ["https://c.example/cb"] });
    expect(named.status).toBe(201);
    expect(named.body.client_name).toBe("Evil  App");
    expect(named.body.client_uri).toBeUndefined();
    expect((await h.db.oAuthClient.findUniqueOrThrow({ where: { id: named.body.client_id! } })).name).toBe("Evil  App");
  });

  it("a metadata document with control characters in its name or URI is cleaned, never a 500; so is a client_id holding one", async () => {
    const res = await tokenFor(docUrl("evil.json"));
    // The client exists now: only the made-up code is refused.
    expect([res.status, res.body.error], JSON.stringify(res.body)).toEqual([400, "invalid_grant"]);
    const stored = await h.db.oAuthClient.findUniqueOrThrow({ where: { id: docUrl("evil.json") } });
    expect(stored).toMatchObject({ kind: "metadata_document", name: "Evil  Doc", clientUri: null, redirectUris: ["https://c.example/cb"] });
    for (const clientId of ["ec_a\u0000b", docUrl("x\u0000.json"), "ec_a b"]) {
      const bad = await tokenFor(clientId);
      expect([bad.status, bad.body.error], JSON.stringify(clientId)).toEqual([401, "invalid_client"]);
    }
  });

  it("half a surrogate pair (a JSON \"\\ud800\") in a registration's name, URI or redirect URI reads as U+FFFD, never a 500", async () => {
    const res = await register({ client_name: "Lone \ud800 App", client_uri: "https://c.example/\udc00", redirect_uris: ["https://c.example/cb\ud800"] });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.client_name).toBe("Lone \ufffd App");
    const stored = await h.db.oAuthClient.findUniqueOrThrow({ where: { id: res.body.client_id! } });
    expect(stored).toMatchObject({ name: "Lone \ufffd App", clientUri: "https://c.example/\ufffd", redirectUris: ["https://c.example/cb\ufffd"] });
  });

  it("so does a client ID metadata document's", async () => {
    const res = await tokenFor(docUrl("lone.json"));
    expect([res.status, res.body.error], JSON.stringify(res.body)).toEqual([400, "invalid_grant"]);
    const stored = await h.db.oAuthClient.findUniqueOrThrow({ where: { id: docUrl("lone.json") } });
    expect(stored).toMatchObject({ name: "Lone \ufffd Doc", clientUri: "https://c.example/\ufffd", redirectUris: ["https://c.example/cb\ufffd"] });
  });

  it("caps the metadata-document clients first read in the last hour that no one has used, apart from registrations", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "2";
    expect((await tokenFor(docUrl("a.json"))).status).toBe(400);
    expect((await tokenFor(docUrl("b.json"))).status).toBe(400);
    const hits = metadataHits;
    const refused = await tokenFor(docUrl("c.json"));
    expect([refused.status, refused.body.error]).toEqual([429, "temporarily_unavailable"]);
    // Refused before fetching: past the cap, naming new URLs costs no outbound reads.
    expect(metadataHits).toBe(hits);
    expect(await h.db.oAuthClient.count({ where: { kind: "metadata_document" } })).toBe(2);
    // A document already known is read again at its daily refresh without counting as new.
    await h.db.oAuthClient.update({ where: { id: docUrl("a.json") }, data: { fetchedAt: new Date(Date.now() - 2 * 24 * HOUR) } });
    expect((await tokenFor(docUrl("a.json"))).status).toBe(400);
    // Registrations have their own count.
    expect((await register()).status).toBe(201);
    // A used document client, or one first read over an hour ago, no longer counts.
    await grantFor(docUrl("a.json"));
    expect((await tokenFor(docUrl("c.json"))).status).toBe(400);
    expect((await tokenFor(docUrl("d.json"))).status).toBe(429);
    await h.db.oAuthClient.update({ where: { id: docUrl("b.json") }, data: { createdAt: new Date(Date.now() - 2 * HOUR) } });
    expect((await tokenFor(docUrl("d.json"))).status).toBe(400);
  });

  it("many first reads of new documents at once stay within the cap", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "3";
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => tokenFor(docUrl(`many-${i}.json`))));
    expect(results.filter((r) => r.status === 400)).toHaveLength(3);
    expect(results.filter((r) => r.status === 429)).toHaveLength(5);
    expect(await h.db.oAuthClient.count({ where: { kind: "metadata_document" } })).toBe(3);
  });

  it("prunes codes and refresh tokens expired over a day ago, keeping live and recently expired ones", async () => {
    const ann = await h.user("Ann");
    await h.db.oAuthClient.create({ data: { id: "ec_tokens", name: "Tokens", redirectUris: ["https://c.example/cb"], kind: "registered" } });
    const grant = await h.db.oAuthGrant.create({ data: { id: newId(), userId: ann.id, clientId: "ec_tokens", hubIds: [], allHubs: true, scope: "read", resource: "http://engram.test/mcp" } });
    const at = (hoursFromNow: number) => new Date(Date.now() + hoursFromNow * HOUR);
    await h.db.oAuthRefreshToken.createMany({
      data: [
        { tokenHash: "rt-old-used", grantId: grant.id, expiresAt: at(-25), usedAt: at(-30 * 24) },
        { tokenHash: "rt-old-unused", grantId: grant.id, expiresAt: at(-48) },
        { tokenHash: "rt-recently-expired", grantId: grant.id, expiresAt: at(-1), usedAt: at(-2) },
        { tokenHash: "rt-live", grantId: grant.id, expiresAt: at(24) },
      ],
    });
    const code = (codeHash: string, expiresAt: Date) => ({ codeHash, grantId: grant.id, redirectUri: "https://c.example/cb", codeChallenge: "", resource: "http://engram.test/mcp", expiresAt });
    await h.db.oAuthCode.createMany({ data: [code("code-old", at(-25)), code("code-recent", at(-1)), code("code-live", at(0.05))] });
    expect(await pruneExpiredOAuthTokens(h.database)).toBe(3);
    expect((await h.db.oAuthRefreshToken.findMany({ select: { tokenHash: true }, orderBy: { tokenHash: "asc" } })).map((r) => r.tokenHash)).toEqual(["rt-live", "rt-recently-expired"]);
    expect((await h.db.oAuthCode.findMany({ select: { codeHash: true }, orderBy: { codeHash: "asc" } })).map((r) => r.codeHash)).toEqual(["code-live", "code-recent"]);
  });
});

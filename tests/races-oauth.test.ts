import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import pg from "pg";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { approveConsent } from "@/lib/oauth/approve-consent.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { pruneUnusedOAuthClients } from "@/lib/oauth/prune-unused-clients.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, testPostgres, type ApiResponse, type Harness } from "./support/harness.ts";
import { routerFor } from "./support/router.ts";

/**
 * Rotation of OAuth codes and refresh tokens: spending the old one and writing the new pair is one
 * step. Under `npm run test:postgres` the concurrent tests send their requests truly at once; the
 * failure tests run on both databases.
 */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
  await ensureCliClient(h.db);
});
afterAll(() => h.close());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fresh CLI grant and its code (no PKCE: the CLI's own client). */
async function cliCode(name: string) {
  const user = await h.user(name);
  const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
  const code = await approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date());
  const grant = await h.db.oAuthGrant.findFirstOrThrow({ where: { userId: user.id } });
  return { user, code, grantId: grant.id };
}

describe("one consent form posted several times at once", () => {
  it("makes one grant: the others are refused as used, none made beside it", async () => {
    const user = await h.user("Double Click");
    const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
    const token = `${Date.now()}.same-form`;
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date(), undefined, token)));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(results.filter((r) => r.status === "rejected").map((r) => ((r as PromiseRejectedResult).reason as { code?: string }).code)).toEqual(["used", "used", "used", "used"]);
    expect(await h.db.oAuthGrant.count({ where: { userId: user.id } })).toBe(1);
  });
});

async function signedIn(name: string) {
  const { user, code, grantId } = await cliCode(name);
  const res = await h.anonymous.post("/v1/auth/exchange", { code });
  expect(res.status, res.text).toBe(200);
  return { user, grantId, refreshToken: res.body.data.refresh_token as string, accessToken: res.body.data.access_token as string };
}

const oauth = routerFor(["oauth"]);

async function tokenEndpoint(params: Record<string, string>) {
  const res = await oauth(new Request("http://engram.test/oauth/token", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(params) }));
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text) as Record<string, string> };
}

/**
 * Makes every insert into oauth_refresh_tokens fail while `work` runs, as a database that drops
 * the connection between two statements would: a real trigger on the test database, nothing mocked.
 */
async function withRefreshInsertsFailing<T>(work: () => Promise<T>): Promise<T> {
  await h.db.$executeRawUnsafe(`CREATE FUNCTION refuse_refresh_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'insert refused by the test'; END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER refuse_refresh_insert BEFORE INSERT ON oauth_refresh_tokens FOR EACH ROW EXECUTE FUNCTION refuse_refresh_insert()`);
  try {
    return await work();
  } finally {
    await h.db.$executeRawUnsafe(`DROP TRIGGER refuse_refresh_insert ON oauth_refresh_tokens`);
    await h.db.$executeRawUnsafe(`DROP FUNCTION refuse_refresh_insert()`);
  }
}

describe("a refresh that fails half-way", () => {
  it("keeps the old refresh token: the retry rotates it and the grant lives", async () => {
    const { grantId, refreshToken } = await signedIn("HalfRefresh");
    const failed = await withRefreshInsertsFailing(() => h.anonymous.post("/v1/auth/refresh", { refresh_token: refreshToken }));
    expect(failed.status).toBe(500);
    expect((await h.db.oAuthRefreshToken.findUniqueOrThrow({ where: { tokenHash: hashSecret(refreshToken) } })).usedAt).toBeNull();
    const retried = await h.anonymous.post("/v1/auth/refresh", { refresh_token: refreshToken });
    expect(retried.status, retried.text).toBe(200);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
  });

  it("at /oauth/token too", async () => {
    const { grantId, refreshToken } = await signedIn("HalfRefreshToken");
    const failed = await withRefreshInsertsFailing(() => tokenEndpoint({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: CLI_CLIENT_ID }));
    expect(failed.status).toBe(500);
    const retried = await tokenEndpoint({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: CLI_CLIENT_ID });
    expect(retried.status, retried.text).toBe(200);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
  });

  it("a code exchange that fails half-way leaves the code unused: the retry gets the pair, nothing is revoked", async () => {
    const { code, grantId } = await cliCode("HalfExchange");
    const failed = await withRefreshInsertsFailing(() => h.anonymous.post("/v1/auth/exchange", { code }));
    expect(failed.status).toBe(500);
    const retried = await h.anonymous.post("/v1/auth/exchange", { code });
    expect(retried.status, retried.text).toBe(200);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
  });
});

describe("concurrent refreshes of one token", () => {
  it.skipIf(!testPostgres())("ten at once: exactly one new pair, nine refusals inside the reuse grace, the grant lives", async () => {
    const { grantId, refreshToken } = await signedIn("TenRefreshes");
    const results = await Promise.all(Array.from({ length: 10 }, () => h.anonymous.post("/v1/auth/refresh", { refresh_token: refreshToken })));
    expect(results.map((r) => r.status).sort()).toEqual([200, ...Array(9).fill(410)]);
    expect(results.filter((r) => r.status === 410).every((r) => r.body.error.code === "used")).toBe(true);
    // The first pair's refresh token and the one new pair: nothing else was minted.
    expect(await h.db.oAuthRefreshToken.count({ where: { grantId } })).toBe(2);
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
    const winner = results.find((r) => r.status === 200)!;
    expect((await h.anonymous.post("/v1/auth/refresh", { refresh_token: winner.body.data.refresh_token })).status).toBe(200);
  });

  it.skipIf(!testPostgres())("while a rotation waits to write the new pair, no one sees the old token spent without it", async () => {
    const { grantId, refreshToken } = await signedIn("StalledRefresh");
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let refreshed: Promise<ApiResponse> | undefined;
    let usedWhileWaiting: unknown;
    try {
      // Holding the grant's row keeps the rotation from writing its new refresh token (its foreign key).
      await side.query("BEGIN");
      await side.query("SELECT 1 FROM oauth_grants WHERE id = $1 FOR UPDATE", [grantId]);
      refreshed = h.anonymous.post("/v1/auth/refresh", { refresh_token: refreshToken });
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the rotation never waited for the grant's row");
        await sleep(20);
      }
      const { rows } = await side.query("SELECT used_at FROM oauth_refresh_tokens WHERE token_hash = $1", [hashSecret(refreshToken)]);
      usedWhileWaiting = rows[0].used_at;
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(usedWhileWaiting).toBeNull();
    const res = await refreshed!;
    expect(res.status, res.text).toBe(200);
    expect(await h.db.oAuthRefreshToken.count({ where: { grantId } })).toBe(2);
  });

  it.skipIf(!testPostgres())("a rotation waiting while the grant is revoked is refused and mints nothing", async () => {
    const { grantId, refreshToken } = await signedIn("RevokedMidRefresh");
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let refreshed: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("UPDATE oauth_grants SET revoked_at = now(), revoked_reason = 'revoked_by_user' WHERE id = $1", [grantId]);
      let settled = false;
      refreshed = h.anonymous.post("/v1/auth/refresh", { refresh_token: refreshToken }).finally(() => (settled = true));
      // Until it waits for the revocation, or (no lock taken on the grant) it has answered before it.
      for (let waited = 0; !settled; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the rotation neither waited for the grant's row nor answered");
        await sleep(20);
      }
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const res = await refreshed!;
    expect([res.status, res.body?.error?.code], res.text).toEqual([410, "revoked"]);
    expect(await h.db.oAuthRefreshToken.count({ where: { grantId } })).toBe(1);
  });
});

describe("concurrent redemptions of one authorization code", () => {
  it.skipIf(!testPostgres())("ten at /oauth/token at once: exactly one token pair is issued", async () => {
    const user = await h.user("TenCodeRedemptions");
    const clientId = `ec_race_${user.id.slice(0, 8)}`;
    await h.db.oAuthClient.create({ data: { id: clientId, name: "Race", redirectUris: ["https://c.example/cb"], kind: "registered", createdAt: new Date() } });
    const verifier = "v".repeat(43);
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const request = { client: await findClient(h.db, clientId, new Date()), redirectUri: "https://c.example/cb", state: undefined, codeChallenge: challenge, resource: "http://engram.test/mcp", wantsWrite: true };
    const code = await approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date());
    const grant = await h.db.oAuthGrant.findFirstOrThrow({ where: { userId: user.id } });
    const params = { grant_type: "authorization_code", code, client_id: clientId, code_verifier: verifier, redirect_uri: "https://c.example/cb" };
    const results = await Promise.all(Array.from({ length: 10 }, () => tokenEndpoint(params)));
    expect(results.map((r) => r.status).sort(), JSON.stringify(results.map((r) => r.body))).toEqual([200, ...Array(9).fill(400)]);
    expect(results.filter((r) => r.status === 400).every((r) => r.body.error === "invalid_grant")).toBe(true);
    expect(await h.db.oAuthRefreshToken.count({ where: { grantId: grant.id } })).toBe(1);
    // docs/mcp.md: "redeeming a used code revokes what it was exchanged for" (RFC 6749 §4.1.2): the
    // nine replays end the grant, and the winner's pair with it.
    expect(await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grant.id } })).toMatchObject({ revokedAt: expect.any(Date), revokedReason: "authorization_code_reuse" });
    const winner = results.find((r) => r.status === 200)!;
    const refreshed = await tokenEndpoint({ grant_type: "refresh_token", refresh_token: winner.body.refresh_token!, client_id: clientId });
    expect([refreshed.status, refreshed.body.error]).toEqual([400, "invalid_grant"]);
  });
});

describe("the unused-clients prune against a consent given at that moment", () => {
  it.skipIf(!testPostgres())("a grant committed while the prune waits keeps its client (and itself: the delete would cascade)", async () => {
    const user = await h.user("LateConsent");
    const clientId = `ec_late_${user.id.slice(0, 8)}`;
    // Registered two days ago and never used: the prune's candidate, until this consent.
    await h.db.oAuthClient.create({ data: { id: clientId, name: "Late", redirectUris: ["https://c.example/cb"], kind: "registered", createdAt: new Date(Date.now() - 2 * 24 * 60 * 60_000) } });
    const grantId = newId();
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let pruned: Promise<number> | undefined;
    let blockedBeforeCommit = false;
    try {
      // The consent's transaction: its grant written (the client's row key-share locked by the foreign key), not yet committed.
      await side.query("BEGIN");
      await side.query(
        "INSERT INTO oauth_grants (id, user_id, client_id, hub_ids, all_hubs, scope, resource, created_at) VALUES ($1, $2, $3, '{}', true, 'read write', 'http://engram.test/mcp', now())",
        [grantId, user.id, clientId],
      );
      let settled = false;
      pruned = pruneUnusedOAuthClients(h.database).finally(() => (settled = true));
      // The race only happens if the prune waits for the consent's lock: a prune that finished first
      // (or never took the client as a candidate) would pass the checks below without it.
      for (let waited = 0; !blockedBeforeCommit && !settled; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        blockedBeforeCommit = rows[0].n > 0;
        if (waited > 20_000) throw new Error("the prune neither waited for the consent nor finished");
        if (!blockedBeforeCommit) await sleep(20);
      }
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    await pruned;
    expect(blockedBeforeCommit, "the prune waited for the consent's lock before its COMMIT").toBe(true);
    expect(await h.db.oAuthClient.count({ where: { id: clientId } })).toBe(1);
    expect(await h.db.oAuthGrant.count({ where: { id: grantId } })).toBe(1);
  });
});

describe("the unused-clients prune's row locks", () => {
  // Every multi-row lock takes its rows in id order (lib/db/row-lock.ts): two transactions locking
  // some of the same rows in other orders deadlock. The prune's FOR UPDATE had no ORDER BY, so it
  // locked in whatever order the plan read them (a sequential scan: the order rows were written).
  it.skipIf(!testPostgres())("locks its batch in id order: blocked on the middle client, it holds the lower one and not the higher", async () => {
    const old = new Date(Date.now() - 2 * 24 * 60 * 60_000);
    const [low, middle, high] = ["ec_order_a", "ec_order_b", "ec_order_c"];
    // Written highest id first: a lock taken in the order the rows are stored starts from the high end.
    for (const id of [high!, middle!, low!]) await h.db.oAuthClient.create({ data: { id, name: "Order", redirectUris: ["https://c.example/cb"], kind: "registered", createdAt: old } });
    const side = new pg.Client({ connectionString: h.url! });
    const probe = new pg.Client({ connectionString: h.url! });
    await side.connect();
    await probe.connect();
    const lockedByPrune = async (id: string) => {
      await probe.query("BEGIN");
      try {
        await probe.query("SELECT 1 FROM oauth_clients WHERE id = $1 FOR UPDATE NOWAIT", [id]);
        return false;
      } catch (error) {
        if ((error as { code?: string }).code === "55P03") return true;
        throw error;
      } finally {
        await probe.query("ROLLBACK");
      }
    };
    let pruned: Promise<number> | undefined;
    const held: Record<string, boolean> = {};
    try {
      await side.query("BEGIN");
      await side.query("SELECT 1 FROM oauth_clients WHERE id = $1 FOR UPDATE", [middle]);
      pruned = pruneUnusedOAuthClients(h.database);
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the prune never waited for the middle client's row");
        await sleep(20);
      }
      held.low = await lockedByPrune(low!);
      held.high = await lockedByPrune(high!);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
      await probe.end();
    }
    expect(held).toEqual({ low: true, high: false });
    await pruned;
    expect(await h.db.oAuthClient.count({ where: { id: { in: [low!, middle!, high!] } } })).toBe(0);
  });
});

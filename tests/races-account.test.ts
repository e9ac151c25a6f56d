import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { newId } from "@/lib/ids.ts";
import { encode } from "next-auth/jwt";
import pg from "pg";
import { apiKeysLockKey, createApiKey } from "@/lib/auth/create-api-key.ts";
import { endSession } from "@/lib/auth/end-session.ts";
import { claimAccount } from "@/lib/auth/claim-account.ts";
import { resolveSession, sessionOf, sessionSecret } from "@/lib/auth/session.ts";
import { agentLockKey } from "@/lib/agents/connected-agents.ts";
import { approveConsent } from "@/lib/oauth/approve-consent.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { resetConfig } from "@/lib/config.ts";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { PostgresThrottleStore } from "@/lib/auth/postgres-throttle-store.ts";
import { reserveCodeSignIn, setSignInThrottleStore } from "@/lib/auth/sign-in-throttle.ts";
import { clientFor, createHarness, testPostgres, type ApiResponse, type Harness } from "./support/harness.ts";
import { sessionCookieFor } from "./support/oauth-consent.ts";

/**
 * Races on this stop's account features that only a server with several connections can lose: each
 * claims a serialisation (a lock or a conditional write), and these send the requests truly at once
 * under `npm run test:postgres` (under `npm test` PGlite runs them one statement at a time).
 */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
// Each test counts sign-in failures afresh, in the database (one store every connection shares):
// failures left by one test must not lock the next out, nor hide what it counts.
beforeEach(async () => {
  await h.db.signInThrottle.deleteMany({});
  setSignInThrottleStore(new PostgresThrottleStore(async () => h.db));
});
afterEach(() => {
  delete process.env.ENGRAM_EMAIL_CODE_DEV_RETURN;
  delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
});
afterAll(async () => {
  setSignInThrottleStore(undefined);
  await h.close();
});

/** The failed sign-ins counted against client addresses. */
const failuresCounted = async () => (await h.db.signInThrottle.findMany({ where: { key: { startsWith: "ip:" } } })).reduce((n, row) => n + row.failures, 0);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const statuses = (results: ApiResponse[]) => results.map((r) => r.status).sort((a, b) => a - b);

describe("account races", () => {
  it("unlinking GitHub and Google at once, with no password, for ten users at once: one goes, the other stays (never no way in)", async () => {
    const users = await Promise.all(Array.from({ length: 10 }, (_, i) => h.user(`Unlinker${i}`)));
    for (const user of users) {
      for (const provider of ["github", "google"]) {
        await h.db.oAuthAccount.create({ data: { id: newId(), userId: user.id, provider, providerAccountId: `${provider}-${user.id}` } });
      }
    }
    const results = await Promise.all(users.map((user) => Promise.all([user.delete("/v1/auth/link/github"), user.delete("/v1/auth/link/google")])));
    for (const [i, pair] of results.entries()) {
      expect(statuses(pair), users[i]!.name).toEqual([200, 409]);
      expect(await h.db.oAuthAccount.count({ where: { userId: users[i]!.id } })).toBe(1);
    }
  });

  it("one e-mail code verified ten times at once: one sign-in, nine refusals, one grant", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    const bob = await h.user("Bob");
    const sent = await h.anonymous.post("/v1/auth/email/request", { email: bob.email });
    const code = sent.body.data.dev_code as string;
    const results = await Promise.all(Array.from({ length: 10 }, () => h.anonymous.post("/v1/auth/email/verify", { email: bob.email, code })));
    expect(statuses(results)).toEqual([200, ...Array(9).fill(401)]);
    expect(await h.db.oAuthGrant.count({ where: { userId: bob.id } })).toBe(1);
    // Exactly one token pair: the code is spent in the transaction that issues it, never by a loser.
    expect(await h.db.oAuthRefreshToken.count({ where: { grant: { userId: bob.id } } })).toBe(1);
    expect(await h.db.emailSignInCode.count({ where: { email: bob.email, consumedAt: null } })).toBe(0);
    // The nine were right codes that lost the race, not guesses: none counts against the client.
    expect(await failuresCounted()).toBe(0);
  });

  it("wrong e-mail codes for many addresses sent at once from one client get no more checks than one after another", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const users = await Promise.all(Array.from({ length: 8 }, (_, i) => h.user(`Sprayed${i}`)));
    const codes = await Promise.all(users.map(async (user) => (await h.anonymous.post("/v1/auth/email/request", { email: user.email })).body.data.dev_code as string));
    const from = { headers: { [SOCKET_ADDRESS_HEADER]: "203.0.113.50" } };
    const results = await Promise.all(users.map((user, i) => h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: codes[i] === "000000" ? "000001" : "000000" }, from)));
    // One after another, the third wrong try locks the client out: three are checked, five refused.
    expect(statuses(results)).toEqual([...Array(3).fill(401), ...Array(5).fill(429)]);
    const tries = await h.db.emailSignInCode.aggregate({ where: { email: { in: users.map((u) => u.email) } }, _sum: { attempts: true } });
    expect(tries._sum.attempts).toBe(3);
  });

  it("right e-mail codes from one client, one after another or at once, count nothing against it", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const users = await Promise.all(Array.from({ length: 5 }, (_, i) => h.user(`Office${i}`)));
    const codes = await Promise.all(users.map(async (user) => (await h.anonymous.post("/v1/auth/email/request", { email: user.email })).body.data.dev_code as string));
    const from = { headers: { [SOCKET_ADDRESS_HEADER]: "203.0.113.51" } };
    // One after another, each signs in and the next is checked: people behind one address are not locked out by signing in.
    for (const [i, user] of users.slice(0, 3).entries()) expect((await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: codes[i] }, from)).status).toBe(200);
    expect(await failuresCounted()).toBe(0);
    const results = await Promise.all(users.slice(3).map((user, i) => h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: codes[i + 3] }, from)));
    expect(statuses(results)).toEqual([200, 200]);
    expect(await failuresCounted()).toBe(0);
  });

  it("right e-mail codes sent at once from a client past its free failures: the ones refused unchecked give their count back", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const users = await Promise.all(Array.from({ length: 6 }, (_, i) => h.user(`Crowd${i}`)));
    const codes = await Promise.all(users.map(async (user) => (await h.anonymous.post("/v1/auth/email/request", { email: user.email })).body.data.dev_code as string));
    const from = { headers: { [SOCKET_ADDRESS_HEADER]: "203.0.113.52" } };
    await h.db.signInThrottle.create({ data: { key: "ip:203.0.113.52", failures: 2, untilMs: 0n, expiresMs: BigInt(Date.now() + 3600_000) } });
    const results = await Promise.all(users.map((user, i) => h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: codes[i] }, from)));
    expect(statuses(results)).toContain(429);
    // Only the two earlier failures count: the codes checked were right, the others were never checked.
    expect(await h.db.signInThrottle.findUnique({ where: { key: "ip:203.0.113.52" }, select: { failures: true, untilMs: true } })).toEqual({ failures: 2, untilMs: 0n });
  });

  it("the first e-mail sign-ins of a fresh server, ten at once: each signs in (the CLI's client row is made once, no 409)", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    // As on a server no one has signed in to from the CLI yet (its grants go with it).
    await h.db.oAuthClient.deleteMany({ where: { id: CLI_CLIENT_ID } });
    const users = await Promise.all(Array.from({ length: 10 }, (_, i) => h.user(`First${i}`)));
    const codes = await Promise.all(users.map(async (user) => (await h.anonymous.post("/v1/auth/email/request", { email: user.email })).body.data.dev_code as string));
    const results = await Promise.all(users.map((user, i) => h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: codes[i] })));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(await h.db.oAuthClient.count({ where: { id: CLI_CLIENT_ID } })).toBe(1);
  });

  it("a key made by the holder of an unproven account while its owner proves the address: afterwards the account has no working key", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    // The key is made at a different moment of the claim each time.
    for (let i = 0; i < 20; i++) {
      const squatter = await h.user(`Squatter${i}`);
      await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: true } });
      const code = (await h.anonymous.post("/v1/auth/email/request", { email: squatter.email })).body.data.dev_code as string;
      const [made, verified] = await Promise.all([sleep(i / 2).then(() => squatter.post("/v1/auth/api-keys", { name: "stay" })), h.anonymous.post("/v1/auth/email/verify", { email: squatter.email, code })]);
      expect(verified.status).toBe(200);
      expect([201, 401]).toContain(made.status);
      expect(await h.db.apiKey.count({ where: { userId: squatter.id, revokedAt: null } }), `try ${i}`).toBe(0);
    }
  });

  it("five checklist restarts at once: three start (the daily limit), one checklist is pending", async () => {
    const cyd = await h.user("Cyd");
    const results = await Promise.all(Array.from({ length: 5 }, () => cyd.post("/v1/onboarding/restart", {})));
    expect(statuses(results)).toEqual([201, 201, 201, 429, 429]);
    expect(await h.db.notification.count({ where: { userId: cyd.id, kind: "checklist", status: "pending" } })).toBe(1);
    const versions = results.filter((r) => r.status === 201).map((r) => r.body.data.source_id).sort();
    expect(versions).toEqual(["v1", "v2", "v3"]);
  });

  it("five renames of one agent at once: all answer, one row holds one of them", async () => {
    const dan = await h.user("Dan");
    await dan.post("/v1/auth/api-keys", { name: "agent", agent_name: "codex" });
    const names = ["A", "B", "C", "D", "E"];
    const results = await Promise.all(names.map((name) => dan.patch("/v1/agents/codex", { display_name: name })));
    expect(statuses(results)).toEqual([200, 200, 200, 200, 200]);
    const rows = await h.db.connectedAgent.findMany({ where: { ownerId: dan.id } });
    expect(rows).toHaveLength(1);
    expect(names).toContain(rows[0]!.displayName);
  });

  it("renames racing disconnects of ten agents: each agent is gone afterwards, never written back as a renamed, disconnected agent", async () => {
    const eve = await h.user("Eve");
    const agents = Array.from({ length: 10 }, (_, i) => `agent-${i}`);
    for (const agent of agents) expect((await eve.post("/v1/auth/api-keys", { name: agent, agent_name: agent })).status).toBe(201);
    const results = await Promise.all(agents.map((agent) => Promise.all([eve.patch(`/v1/agents/${agent}`, { display_name: `Renamed ${agent}` }), eve.delete(`/v1/agents/${agent}`)])));
    for (const [rename, disconnect] of results) {
      expect(disconnect.status).toBe(200);
      expect(disconnect.body.data.disconnected).toBe(true);
      // Before the disconnect it renamed (then was forgotten), after it the agent is not found.
      expect([200, 404]).toContain(rename.status);
    }
    expect(await h.db.connectedAgent.count({ where: { ownerId: eve.id } })).toBe(0);
    expect((await eve.get("/v1/agents")).body.data).toEqual([]);
  });

  it("four steps of five checklists ticked at once: every tick stays (no lost update of the payload)", async () => {
    const users = await Promise.all(Array.from({ length: 5 }, (_, i) => h.user(`Ticker${i}`)));
    const steps = ["first_memory", "connect_agent", "first_recall", "invite_teammate"];
    const rows = await Promise.all(users.map(async (user) => ({ user, id: (await user.post("/v1/onboarding/restart", {})).body.data.id as string })));
    const results = await Promise.all(rows.flatMap(({ user, id }) => steps.map((item) => user.post(`/v1/notifications/${id}/items/${item}/complete`, {}))));
    expect(results.every((r) => r.status === 200)).toBe(true);
    for (const { id } of rows) {
      const stored = await h.db.notification.findUniqueOrThrow({ where: { id } });
      const done = (stored.payload as { items: { id: string; completed_at?: string }[] }).items.filter((i) => i.completed_at).map((i) => i.id);
      expect(done.sort()).toEqual([...steps].sort());
    }
  });

  it("a checklist dismissed while its last item is ticked: the one that answered 200 is what is stored", async () => {
    for (let i = 0; i < 20; i++) {
      const user = await h.user(`Dismisser${i}`);
      const id = (await user.post("/v1/onboarding/restart", {})).body.data.id as string;
      for (const item of ["first_memory", "connect_agent", "first_recall"]) expect((await user.post(`/v1/notifications/${id}/items/${item}/complete`, {})).status).toBe(200);
      const [ticked, dismissed] = await Promise.all([
        user.post(`/v1/notifications/${id}/items/five_memories/complete`, {}),
        sleep(i / 4).then(() => user.post(`/v1/notifications/${id}/resolve`, { action: "dismiss" })),
      ]);
      expect([200, 409]).toContain(dismissed.status);
      const stored = await h.db.notification.findUniqueOrThrow({ where: { id } });
      expect(stored.resolution, `try ${i}`).toBe(dismissed.status === 200 ? "dismissed" : "applied_auto");
      expect(Boolean(ticked.body.data.auto_resolved), `try ${i}`).toBe(stored.resolution === "applied_auto");
    }
  });

  it("an agent's key making a key while the agent is disconnected: afterwards the agent has no working key", async () => {
    // The key is made at a different moment of the disconnect each time.
    for (let i = 0; i < 20; i++) {
      const user = await h.user(`Disconnecter${i}`);
      const agentKey = clientFor((await user.post("/v1/auth/api-keys", { name: "bot key", agent_name: "bot" })).body.data.key as string);
      const [made, disconnected] = await Promise.all([sleep(i / 2).then(() => agentKey.post("/v1/auth/api-keys", { name: "child" })), user.delete("/v1/agents/bot")]);
      expect(disconnected.status).toBe(200);
      expect([201, 401]).toContain(made.status);
      expect(await h.db.apiKey.count({ where: { userId: user.id, agentName: "bot", revokedAt: null } }), `try ${i}`).toBe(0);
    }
  });
});

describe("an e-mail code sign-up while a password sign-up of the same address commits", () => {
  /**
   * The code's verify found no account, so it made one; a password sign-up that committed first made
   * its insert fail, and verify then signed the code holder into that account as it was: the
   * sign-up's password still worked, so the squatter shared the prover's account. Here the sign-up's
   * insert is held open on a second connection until verify's own insert waits on it.
   */
  it.skipIf(!testPostgres())("the account the sign-up made is claimed: its password ends", async () => {
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    const email = `raced-${Date.now()}@corp.example`;
    const code = (await h.anonymous.post("/v1/auth/email/request", { email })).body.data.dev_code as string;
    const squatterId = newId();
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let verified: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query(
        "INSERT INTO users (id, email, name, password_hash, email_unverified, created_at, updated_at) VALUES ($1, $2, 'Squatter', 'squatter-hash', true, now(), now())",
        [squatterId, email],
      );
      verified = h.anonymous.post("/v1/auth/email/verify", { email, code });
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("verify's insert never waited for the sign-up's");
        await sleep(20);
      }
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const res = await verified!;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const me = await h.anonymous.get("/v1/auth/me", { headers: { authorization: `Bearer ${res.body.data.access_token}` } });
    expect(me.body.data.user.id).toBe(squatterId);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: squatterId } })).toMatchObject({ passwordHash: null, emailUnverified: false });
  });
});

describe("a dashboard session making a key while a claim cuts the session off", () => {
  /**
   * A session has no row for the key's insert to re-check (an API key's or grant's row is read again
   * under the api-keys lock): a squatter's dashboard POST authenticated before the owner's claim
   * still inserted a key after the claim committed, and that key worked. Here the POST waits for the
   * api-keys lock (held by a second connection, as a slow key issue would) while the claim's cut-off
   * commits; the POST must then be refused and leave no key.
   */
  it.skipIf(!testPostgres())("the key is refused (401) once the session is cut off, and none is left", async () => {
    const squatter = await h.user("SessionSquatter");
    await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: true } });
    const token = await encode({ token: { sub: squatter.id, sid: newId(), signed_in_at: Date.now() - 5_000 }, secret: await sessionSecret(h.db) });
    const headers = { cookie: `next-auth.session-token=${token}`, "sec-fetch-site": "same-origin" };
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let made: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [apiKeysLockKey(squatter.id)]);
      made = h.anonymous.post("/v1/auth/api-keys", { name: "stay" }, { headers });
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the key's insert never waited for the api-keys lock");
        await sleep(20);
      }
      // The claim's cut-off (lib/auth/claim-account.ts), committed while the POST waits.
      await side.query("UPDATE users SET email_unverified = false, password_hash = NULL, sessions_valid_after = now() WHERE id = $1", [squatter.id]);
      await side.query("UPDATE api_keys SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL", [squatter.id]);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    const res = await made!;
    expect(res.status, JSON.stringify(res.body)).toBe(401);
    expect(await h.db.apiKey.count({ where: { userId: squatter.id, revokedAt: null } })).toBe(0);
  });

  it("a session that authenticated, then was signed out of, makes no key", async () => {
    const ann = await h.user("SignedOut");
    const cookie = await sessionCookieFor(h.db, ann.id);
    const ctx = { db: h.db, user: { id: ann.id, email: ann.email, name: ann.name }, now: () => new Date() };
    const { credential } = await resolveSession(h.db, new Request("http://engram.test/v1/auth/api-keys", { method: "POST", headers: { cookie, "sec-fetch-site": "same-origin" } }), new Date());
    expect(await endSession(h.db, cookie)).toBe(true);
    await expect(createApiKey({ ...ctx, credential }, { name: "late" })).rejects.toMatchObject({ code: "unauthorized" });
    expect(await h.db.apiKey.count({ where: { userId: ann.id, name: "late" } })).toBe(0);
  });
});

describe("a dashboard session consenting to an app while a claim cuts the session off", () => {
  const consentAs = async (user: { id: string; email: string; name: string }, cookie: string) => {
    const signedIn = await sessionOf(h.db, cookie.slice(cookie.indexOf("=") + 1));
    expect(signedIn).toBeDefined();
    await ensureCliClient(h.db);
    const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
    return () => approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date(), signedIn!.session);
  };

  it("a consent checked before the claim makes no grant after it", async () => {
    const squatter = await h.user("ConsentSquatter");
    await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: true } });
    const token = await encode({ token: { sub: squatter.id, sid: newId(), signed_in_at: Date.now() - 5_000 }, secret: await sessionSecret(h.db) });
    const approve = await consentAs(squatter, `next-auth.session-token=${token}`);
    expect(await claimAccount(h.db, squatter.id, new Date())).toBe(true);
    await expect(approve()).rejects.toMatchObject({ code: "unauthorized" });
    expect(await h.db.oAuthGrant.count({ where: { userId: squatter.id } })).toBe(0);
  });

  it.skipIf(!testPostgres())("a consent waiting for the api-keys lock while the claim commits is refused, and no live grant is left", async () => {
    const squatter = await h.user("ConsentSquatter2");
    await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: true } });
    const token = await encode({ token: { sub: squatter.id, sid: newId(), signed_in_at: Date.now() - 5_000 }, secret: await sessionSecret(h.db) });
    const approve = await consentAs(squatter, `next-auth.session-token=${token}`);
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let granted: Promise<unknown> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [apiKeysLockKey(squatter.id)]);
      granted = approve().then(
        () => "granted",
        (error: { code?: string }) => error.code,
      );
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the grant's insert never waited for the api-keys lock");
        await sleep(20);
      }
      // The claim's cut-off and revocation (lib/auth/claim-account.ts), committed while the consent waits.
      await side.query("UPDATE users SET email_unverified = false, password_hash = NULL, sessions_valid_after = now() WHERE id = $1", [squatter.id]);
      await side.query("UPDATE oauth_grants SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL", [squatter.id]);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(await granted!).toBe("unauthorized");
    expect(await h.db.oAuthGrant.count({ where: { userId: squatter.id, revokedAt: null } })).toBe(0);
  });
});

/** Polls until `side` blocks another connection, or `settled()` says the request finished without waiting. */
async function untilBlockedOrDone(side: pg.Client, settled: () => boolean): Promise<void> {
  for (let waited = 0; !settled(); waited += 20) {
    const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
    if (rows[0].n > 0) return;
    if (waited > 20_000) throw new Error("the request neither finished nor waited");
    await sleep(20);
  }
}

describe("a checklist restarted while one of its items is being ticked", () => {
  /**
   * A tick (lib/notifications/update-notification-item.ts) reads the checklist under its notification
   * lock and writes it back whole; the restart dismissed it without that lock, so a tick that had read
   * it pending turned the restart's dismissal, already answered and shown, into applied_auto. Here the
   * tick is held between its read and its write on a second connection, as a slow tick would be.
   */
  it.skipIf(!testPostgres())("the old checklist reads the same once the restart has answered as it does afterwards", async () => {
    const fay = await h.user("RestartTicker");
    const old = (await fay.post("/v1/onboarding/restart", {})).body.data.id as string;
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let afterAnswer: string | null | undefined;
    let answered = false;
    let restarted: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`notification:${old}`]);
      expect((await side.query("SELECT status FROM notifications WHERE id = $1", [old])).rows[0].status).toBe("pending");
      restarted = fay.post("/v1/onboarding/restart", {}).then(async (res) => {
        answered = true;
        afterAnswer = (await h.db.notification.findUniqueOrThrow({ where: { id: old } })).resolution;
        return res;
      });
      await untilBlockedOrDone(side, () => answered);
      // The tick's write: its last required item done, the checklist it read pending resolves itself.
      await side.query("UPDATE notifications SET status = 'resolved', resolution = 'applied_auto', resolved_at = now() WHERE id = $1", [old]);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect((await restarted!).status).toBe(201);
    const stored = await h.db.notification.findUniqueOrThrow({ where: { id: old } });
    expect(stored.resolution).toBe(afterAnswer);
    expect(await h.db.notification.count({ where: { userId: fay.id, kind: "checklist", status: "pending" } })).toBe(1);
  });
});

describe("signing out while the same session makes a key", () => {
  /**
   * A key's insert re-reads its session under the api-keys lock, but a sign-out wrote the ended
   * session without that lock: a POST that had checked the session went on to commit its key after
   * the sign-out had answered, a key the signed-out session made afterwards. Here the key's insert
   * is held (a second connection locks the table) after its check, and the sign-out runs meanwhile.
   */
  it.skipIf(!testPostgres())("the sign-out answers only after the key it overlapped is committed", async () => {
    const gil = await h.user("SignOutKeyMaker");
    const cookie = await sessionCookieFor(h.db, gil.id);
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const order: string[] = [];
    let made: Promise<ApiResponse> | undefined;
    let signedOut: Promise<boolean> | undefined;
    let signedOutBeforeKey: boolean | undefined;
    try {
      await side.query("BEGIN");
      await side.query("LOCK TABLE api_keys IN SHARE MODE");
      made = h.anonymous.post("/v1/auth/api-keys", { name: "overlapping" }, { headers: { cookie, "sec-fetch-site": "same-origin" } }).then((res) => (order.push(`key ${res.status}`), res));
      await untilBlockedOrDone(side, () => order.length > 0);
      signedOut = endSession(h.db, cookie).then((ended) => (order.push("signed out"), ended));
      // Until the sign-out has answered, or waits for a lock.
      for (let waited = 0; !order.includes("signed out"); waited += 20) {
        const { rows } = await side.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        );
        if (rows[0].n > 0) break;
        if (waited > 20_000) throw new Error("the sign-out neither finished nor waited");
        await sleep(20);
      }
      // The key's insert waits for the side, holding the api-keys lock: a sign-out that answered by now
      // did not wait for the key. (Once both commit, which answer resolves first is the event loop's.)
      signedOutBeforeKey = order.includes("signed out");
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(await signedOut!).toBe(true);
    expect((await made!).status).toBe(201);
    expect(signedOutBeforeKey).toBe(false);
    expect((await h.anonymous.post("/v1/auth/api-keys", { name: "after" }, { headers: { cookie, "sec-fetch-site": "same-origin" } })).status).toBe(401);
  });
});

describe("a key moved between agents while one of them is disconnected", () => {
  /**
   * A disconnect (lib/agents/disconnect-agent.ts) revokes the agent's keys under the agent's and the
   * api-keys locks; a key's move (PATCH /v1/auth/api-keys/{id}) took neither, so it went through in
   * the middle of a disconnect: a key moved onto the agent was answered before the disconnect
   * committed yet survived it, and a key moved off it answered 200 while the disconnect revoked it.
   * Here a second connection is the disconnect, held open after its revocation.
   */
  async function duringDisconnect(ownerId: string, agentName: string, move: () => Promise<ApiResponse>) {
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const order: string[] = [];
    let moved: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0)), pg_advisory_xact_lock(hashtextextended($2, 0))", [
        agentLockKey(ownerId, agentName),
        apiKeysLockKey(ownerId),
      ]);
      await side.query("UPDATE api_keys SET revoked_at = now() WHERE user_id = $1 AND agent_name = $2 AND revoked_at IS NULL", [ownerId, agentName]);
      moved = move().then((res) => (order.push(`moved ${res.status}`), res));
      await untilBlockedOrDone(side, () => order.length > 0);
      order.push("disconnected");
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    return { res: await moved!, order };
  }

  it.skipIf(!testPostgres())("a key moved onto the agent mid-disconnect is moved after it (and lives), never before it and spared", async () => {
    const hal = await h.user("MoverOnto");
    const key = (await hal.post("/v1/auth/api-keys", { name: "loose", agent_name: "other" })).body.data;
    expect((await hal.post("/v1/auth/api-keys", { name: "bot key", agent_name: "bot" })).status).toBe(201);
    const { res, order } = await duringDisconnect(hal.id, "bot", () => hal.patch(`/v1/auth/api-keys/${key.id}`, { agent_name: "bot" }));
    expect(res.status).toBe(200);
    expect(order).toEqual(["disconnected", "moved 200"]);
  });

  it.skipIf(!testPostgres())("a key moved off the agent mid-disconnect is not found once the disconnect revoked it, never 200 and revoked", async () => {
    const ida = await h.user("MoverOff");
    const key = (await ida.post("/v1/auth/api-keys", { name: "bot key", agent_name: "bot" })).body.data;
    const { res } = await duringDisconnect(ida.id, "bot", () => ida.patch(`/v1/auth/api-keys/${key.id}`, { agent_name: "" }));
    const row = await h.db.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.revokedAt).not.toBeNull();
    expect(res.status, JSON.stringify(res.body)).toBe(404);
  });
});

describe("an administrator's impersonation while the account is claimed", () => {
  /**
   * A claim (lib/auth/claim-account.ts) revokes the account's grants under the api-keys lock; the
   * impersonation grant was inserted without it, so one made in the middle of a claim answered before
   * the claim committed and was still live after it. Here a second connection is the claim, held open
   * after its revocation.
   */
  it.skipIf(!testPostgres())("the impersonation lands after the claim, never before it and spared", async () => {
    process.env.ENGRAM_ADMIN_TOKEN = "races-admin-token-0123456789abcdef";
    resetConfig();
    const squatter = await h.user("ImpersonatedSquatter");
    await h.db.user.update({ where: { id: squatter.id }, data: { emailUnverified: true } });
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const order: string[] = [];
    let impersonated: Promise<ApiResponse> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("UPDATE users SET email_unverified = false, password_hash = NULL, sessions_valid_after = now() WHERE id = $1", [squatter.id]);
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [apiKeysLockKey(squatter.id)]);
      await side.query("UPDATE oauth_grants SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL", [squatter.id]);
      impersonated = h.anonymous
        .post("/v1/auth/impersonate", { user_id: squatter.id }, { headers: { authorization: `Bearer ${process.env.ENGRAM_ADMIN_TOKEN}` } })
        .then((res) => (order.push(`impersonated ${res.status}`), res));
      await untilBlockedOrDone(side, () => order.length > 0);
      order.push("claimed");
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
      delete process.env.ENGRAM_ADMIN_TOKEN;
      resetConfig();
    }
    expect((await impersonated!).status).toBe(200);
    expect(order).toEqual(["claimed", "impersonated 200"]);
  });
});

describe("a checklist refreshed by two reads at once, memories pushed in between", () => {
  /**
   * A refresh (lib/onboarding/refresh-onboarding.ts) read the account's memories before taking the
   * checklist's lock, so one that waited on that lock behind a refresh that had counted a newer push
   * wrote its older count back: the progress bar went from 3 of 5 back to 2. Here the newer refresh
   * is a second connection that holds the lock and writes 3 once the third memory is in.
   */
  it.skipIf(!testPostgres())("the progress stays at the newer count", async () => {
    const kim = await h.user("ProgressCounter");
    const id = (await kim.post("/v1/onboarding/restart", {})).body.data.id as string;
    for (const n of [1, 2]) expect((await kim.post("/v1/memories", { content: `Memory number ${n}.` })).status).toBe(201);
    const progress = async () =>
      ((await h.db.notification.findUniqueOrThrow({ where: { id } })).payload as { items: { id: string; progress?: { current: number } }[] }).items.find((i) => i.id === "five_memories")!.progress!.current;
    expect((await kim.get("/v1/notifications/summary")).status).toBe(200);
    expect(await progress()).toBe(2);
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let summary: Promise<ApiResponse> | undefined;
    let answered = false;
    try {
      await side.query("BEGIN");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`notification:${id}`]);
      summary = kim.get("/v1/notifications/summary").then((res) => ((answered = true), res));
      await untilBlockedOrDone(side, () => answered);
      expect((await kim.post("/v1/memories", { content: "Memory number 3." })).status).toBe(201);
      const index = (await side.query("SELECT payload FROM notifications WHERE id = $1", [id])).rows[0].payload.items.findIndex((i: { id: string }) => i.id === "five_memories");
      await side.query(`UPDATE notifications SET payload = jsonb_set(payload, '{items,${index},progress,current}', '3') WHERE id = $1`, [id]);
      await side.query("COMMIT");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect((await summary!).status).toBe(200);
    expect(await progress()).toBe(3);
  });
});

describe("a key deleted or revoked while a request with it refreshes its last_used_at", () => {
  /** An hour-old last_used_at: the next request with the key refreshes it. */
  const makeStale = (user: { id: string }) => h.db.apiKey.updateMany({ where: { userId: user.id }, data: { lastUsedAt: new Date(Date.now() - 3_600_000) } });

  /**
   * Holds the user's key row from a second connection, sends `requests` with the key (stale
   * last_used_at, so each refreshes it and waits for the row), then runs `meanwhile` on that
   * connection and commits (or rolls back without it).
   */
  async function whileKeyHeld(user: { id: string; get: (path: string) => Promise<ApiResponse> }, requests: number, meanwhile?: string) {
    const other = new pg.Client({ connectionString: h.url! });
    await other.connect();
    try {
      await other.query("BEGIN");
      await other.query("SELECT id FROM api_keys WHERE user_id = $1 FOR UPDATE", [user.id]);
      const sent = Array.from({ length: requests }, () => user.get("/v1/auth/me"));
      for (let waited = 0; ; waited += 20) {
        // Every request waits, the first for this connection, the others (behind it) for the first.
        const { rows } = await other.query(`
          WITH RECURSIVE waiting AS (
            SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))
            UNION SELECT l.pid FROM pg_locks l JOIN waiting w ON w.pid = ANY(pg_blocking_pids(l.pid)) WHERE NOT l.granted
          ) SELECT count(*)::int AS n FROM waiting`);
        if (rows[0].n >= requests) break;
        if (waited > 20_000) throw new Error("the requests never waited for the key's row");
        await sleep(20);
      }
      if (meanwhile) await other.query(meanwhile, [user.id]);
      await other.query(meanwhile ? "COMMIT" : "ROLLBACK");
      return await Promise.all(sent);
    } finally {
      await other.query("ROLLBACK").catch(() => {});
      await other.end();
    }
  }

  it.skipIf(!testPostgres())("deleted: the request is refused (401), not answered 404 by the refresh finding no row", async () => {
    const user = await h.user("DeletedMidRequest");
    await makeStale(user);
    const [res] = await whileKeyHeld(user, 1, "DELETE FROM api_keys WHERE user_id = $1");
    expect(res!.status, res!.text).toBe(401);
    expect(res!.body.error.code).toBe("unauthorized");
  });

  it.skipIf(!testPostgres())("revoked: the request whose refresh lands after the revoke is refused (401)", async () => {
    const user = await h.user("RevokedMidRequest");
    await makeStale(user);
    const [res] = await whileKeyHeld(user, 1, "UPDATE api_keys SET revoked_at = now() WHERE user_id = $1");
    expect(res!.status, res!.text).toBe(401);
  });

  it.skipIf(!testPostgres())("requests at once with the same stale value refresh it once, not once each", async () => {
    const user = await h.user("StaleTogether");
    await makeStale(user);
    // A real trigger counts the refreshes on this test database, nothing mocked.
    await h.db.$executeRawUnsafe(`CREATE TABLE key_refreshes (n int)`);
    await h.db.$executeRawUnsafe(`CREATE FUNCTION count_key_refresh() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO key_refreshes VALUES (1); RETURN NEW; END $$`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER count_key_refresh AFTER UPDATE OF last_used_at ON api_keys FOR EACH ROW EXECUTE FUNCTION count_key_refresh()`);
    try {
      const results = await whileKeyHeld(user, 3);
      expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
      const [refreshes] = await h.db.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM key_refreshes`);
      expect(refreshes!.n).toBe(1);
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER count_key_refresh ON api_keys`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION count_key_refresh()`);
      await h.db.$executeRawUnsafe(`DROP TABLE key_refreshes`);
    }
  });
});

describe("an e-mail code ended between its check and its spend", () => {
  /**
   * Verify checked the code in one transaction and spent it in another, after the account's claim:
   * a fifth wrong try, or a new code's request, committed in between ended the code, and the right
   * code already checked was answered 401. Here verify's claim waits on the user's row, held by a
   * second connection, while the other request runs.
   */
  const interferences = {
    "a fifth wrong try": async (email: string, code: string) => {
      const res = await h.anonymous.post("/v1/auth/email/verify", { email, code: code === "000000" ? "000001" : "000000" });
      expect(res.status).toBe(401);
    },
    "a new code's request": async (email: string) => {
      const res = await h.anonymous.post("/v1/auth/email/request", { email });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    },
  };
  for (const [name, interfere] of Object.entries(interferences)) {
    it.skipIf(!testPostgres())(`${name} after the right code was checked leaves its sign-in to go through`, async () => {
      process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
      const user = await h.user(`Checked${name.length}`);
      await h.db.user.update({ where: { id: user.id }, data: { emailUnverified: true } });
      const code = (await h.anonymous.post("/v1/auth/email/request", { email: user.email })).body.data.dev_code as string;
      const wrong = code === "000000" ? "000001" : "000000";
      for (let i = 0; i < 4; i++) expect((await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: wrong })).status).toBe(401);
      // Past the cooldown, so a new code may be asked for.
      await h.db.emailSignInCode.updateMany({ where: { email: user.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
      const side = new pg.Client({ connectionString: h.url! });
      await side.connect();
      let verified: Promise<ApiResponse> | undefined;
      try {
        await side.query("BEGIN");
        await side.query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", [user.id]);
        verified = h.anonymous.post("/v1/auth/email/verify", { email: user.email, code });
        for (let waited = 0; ; waited += 20) {
          const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
          if (rows[0].n > 0) break;
          if (waited > 20_000) throw new Error("verify's claim never waited for the user's row");
          await sleep(20);
        }
        await interfere(user.email, code);
      } finally {
        await side.query("ROLLBACK").catch(() => {});
        await side.end();
      }
      const res = await verified!;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(await h.db.oAuthGrant.count({ where: { userId: user.id, revokedAt: null } })).toBe(1);
    });
  }
});

describe("sign-in tries from one address sent at once, counted in PostgreSQL", () => {
  // A count raised by one statement and its lock written by the next: a try reading between them
  // saw the new count with no lock (or the expired one) and was let through as if a lock had just run out.
  it("past the free failures, exactly as many are let through as one after another would be: the free ones, then one per expired lock", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    const leaks: string[] = [];
    for (let round = 0; round < 15; round++) {
      const fresh = `198.51.100.${round}`;
      const allowed = (await Promise.all(Array.from({ length: 12 }, () => reserveCodeSignIn(fresh)))).filter((v) => v.allowed).length;
      if (allowed !== 3) leaks.push(`fresh ${round}: ${allowed}`);
      const expired = `198.51.101.${round}`;
      const now = Date.now();
      await h.db.signInThrottle.create({ data: { key: `ip:${expired}`, failures: 3, untilMs: BigInt(now - 1), expiresMs: BigInt(now + 3600_000) } });
      const after = (await Promise.all(Array.from({ length: 12 }, () => reserveCodeSignIn(expired)))).filter((v) => v.allowed).length;
      if (after !== 1) leaks.push(`expired ${round}: ${after}`);
    }
    expect(leaks).toEqual([]);
  });
});

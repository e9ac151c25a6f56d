import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "@/lib/api/errors.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { IMPERSONATION_TTL_SECONDS } from "@/lib/auth/impersonate-user.ts";
import { newId } from "@/lib/ids.ts";
import { approveConsent, CODE_TTL_MS, MAX_GRANTS_PER_CLIENT } from "@/lib/oauth/approve-consent.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { EXPIRED_TOKEN_RETENTION_MS, pruneExpiredOAuthTokens } from "@/lib/oauth/prune-expired-tokens.ts";
import { pruneUnusedOAuthClients } from "@/lib/oauth/prune-unused-clients.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

/** Connected apps: a consent whose code was never exchanged connected nothing. */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
  await ensureCliClient(h.db);
});
afterAll(() => h.close());

async function consent(user: Client, clientId = CLI_CLIENT_ID) {
  const request = { client: await findClient(h.db, clientId, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
  const code = await approveConsent(h.db, user, request, { hubIds: null, write: true }, new Date());
  const row = await h.db.oAuthCode.findUniqueOrThrow({ where: { codeHash: hashSecret(code) } });
  return { code, grantId: row.grantId };
}

const listed = async (user: Client) => ((await user.get("/v1/auth/oauth-grants")).body.data.grants as { id: string }[]).map((g) => g.id);

/** Moves a grant and its code back in time, as if consented to `ms` ago. */
async function consentedAgo(grantId: string, ms: number) {
  const at = new Date(Date.now() - ms);
  await h.db.oAuthGrant.update({ where: { id: grantId }, data: { createdAt: at } });
  await h.db.oAuthCode.updateMany({ where: { grantId }, data: { expiresAt: new Date(at.getTime() + CODE_TTL_MS) } });
}

describe("a consent whose code was never exchanged", () => {
  it("is listed while its code can still be exchanged, and drops out once the code expires", async () => {
    const ann = await h.user("Ann");
    const pending = await consent(ann);
    const exchanged = await consent(ann);
    expect((await h.anonymous.post("/v1/auth/exchange", { code: exchanged.code })).status).toBe(200);
    expect((await listed(ann)).sort()).toEqual([pending.grantId, exchanged.grantId].sort());
    await consentedAgo(pending.grantId, CODE_TTL_MS + 1000);
    await consentedAgo(exchanged.grantId, CODE_TTL_MS + 1000);
    expect(await listed(ann)).toEqual([exchanged.grantId]);
  });

  it("is deleted by the hourly prune once its code is long expired, and its client can be pruned in turn", async () => {
    const bob = await h.user("Bob");
    await h.db.oAuthClient.create({ data: { id: "ec_pending", name: "Pending", redirectUris: ["https://c.example/cb"], kind: "registered", createdAt: new Date(Date.now() - 2 * EXPIRED_TOKEN_RETENTION_MS) } });
    const stale = await consent(bob, "ec_pending");
    const recent = await consent(bob);
    const used = await consent(bob);
    expect((await h.anonymous.post("/v1/auth/exchange", { code: used.code })).status).toBe(200);
    await consentedAgo(stale.grantId, CODE_TTL_MS + EXPIRED_TOKEN_RETENTION_MS + 60_000);
    await consentedAgo(used.grantId, CODE_TTL_MS + EXPIRED_TOKEN_RETENTION_MS + 60_000);
    await pruneExpiredOAuthTokens(h.database);
    const left = await h.db.oAuthGrant.findMany({ where: { userId: bob.id }, select: { id: true } });
    expect(left.map((g) => g.id).sort()).toEqual([recent.grantId, used.grantId].sort());
    expect(await pruneUnusedOAuthClients(h.database)).toBe(1);
    expect(await h.db.oAuthClient.count({ where: { id: "ec_pending" } })).toBe(0);
  });

  it("an impersonation grant (no code, no refresh token) is listed for its user while its token lives, then drops out and is pruned", async () => {
    const cat = await h.user("Cat");
    await h.db.oAuthClient.create({ data: { id: "engram-admin", name: "Administrator (impersonation)", redirectUris: [], kind: "impersonation" } });
    const impersonation = (ago: number) =>
      h.db.oAuthGrant.create({
        data: { id: newId(), userId: cat.id, clientId: "engram-admin", hubIds: [], allHubs: true, scope: "read write", resource: "http://engram.test/mcp", createdAt: new Date(Date.now() - ago) },
      });
    const live = await impersonation(60_000);
    // Its 15-minute token dead: nothing it can still do, so nothing to show; past the retention, nothing to keep.
    const ended = await impersonation(IMPERSONATION_TTL_SECONDS * 1000 + 60_000);
    await impersonation(2 * EXPIRED_TOKEN_RETENTION_MS);
    expect(await listed(cat)).toEqual([live.id]);
    await pruneExpiredOAuthTokens(h.database);
    const left = await h.db.oAuthGrant.findMany({ where: { userId: cat.id }, select: { id: true } });
    expect(left.map((g) => g.id).sort()).toEqual([live.id, ended.id].sort());
  });

  it("a denied consent form is kept while the form could be posted, and pruned after", async () => {
    const dee = await h.user("Dee");
    const now = new Date();
    await h.db.oAuthDeniedConsent.createMany({
      data: [
        { consentTokenHash: "denied-live", userId: dee.id, expiresAt: new Date(now.getTime() + 60_000) },
        { consentTokenHash: "denied-over", userId: dee.id, expiresAt: new Date(now.getTime() - 60_000) },
      ],
    });
    await pruneExpiredOAuthTokens(h.database, now);
    expect((await h.db.oAuthDeniedConsent.findMany({ where: { userId: dee.id }, select: { consentTokenHash: true } })).map((row) => row.consentTokenHash)).toEqual(["denied-live"]);
  });
});

/** A consent exchanged for its pair, as a finished `memax login`. */
async function signedIn(user: Client) {
  const { code, grantId } = await consent(user);
  const res = await h.anonymous.post("/v1/auth/exchange", { code });
  expect(res.status, res.text).toBe(200);
  return { grantId, refreshToken: res.body.data.refresh_token as string };
}

const liveGrants = (user: Client) => h.db.oAuthGrant.count({ where: { userId: user.id, clientId: CLI_CLIENT_ID, revokedAt: null } });
const revokedGrants = (user: Client) => h.db.oAuthGrant.findMany({ where: { userId: user.id, revokedAt: { not: null } }, select: { id: true, revokedReason: true } });
const isLive = async (grantId: string) => (await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt === null;

describe("grants per app", () => {
  it("a user keeps at most MAX_GRANTS_PER_CLIENT live grants per app: a new consent past it revokes the least recently used, other apps untouched", async () => {
    const dan = await h.user("Dan");
    await h.db.oAuthClient.create({ data: { id: "ec_other_app", name: "Other", redirectUris: ["https://c.example/cb"], kind: "registered" } });
    const other = await consent(dan, "ec_other_app");
    const first = await signedIn(dan);
    await consentedAgo(first.grantId, 2 * 60 * 60_000);
    // Consented longer ago still, but used a minute ago: it outranks the one never used since.
    const used = await signedIn(dan);
    await consentedAgo(used.grantId, 3 * 60 * 60_000);
    await h.db.oAuthGrant.update({ where: { id: used.grantId }, data: { lastUsedAt: new Date(Date.now() - 60_000) } });
    for (let i = 2; i < MAX_GRANTS_PER_CLIENT; i++) await signedIn(dan);
    expect(await liveGrants(dan)).toBe(MAX_GRANTS_PER_CLIENT);
    const newest = await consent(dan);
    expect(await liveGrants(dan)).toBe(MAX_GRANTS_PER_CLIENT);
    expect(await revokedGrants(dan)).toEqual([{ id: first.grantId, revokedReason: "superseded" }]);
    for (const kept of [used, other, newest]) expect(await isLive(kept.grantId)).toBe(true);
    // The revoked one's refresh token is refused: what it connected is gone.
    const refreshed = await h.anonymous.post("/v1/auth/refresh", { refresh_token: first.refreshToken });
    expect([refreshed.status, refreshed.body.error?.code]).toEqual([410, "revoked"]);
  });

  // A grant's last_used_at is set only when one of its access tokens is used, so a sign-in just
  // finished (never used yet) ranked as the oldest: `memax login` on two machines in a row revoked the first's.
  it("a sign-in just finished counts as used when it was made: the next sign-in revokes an older grant, not it", async () => {
    const eve = await h.user("Eve");
    const old: string[] = [];
    for (let i = 1; i < MAX_GRANTS_PER_CLIENT; i++) {
      const { grantId } = await signedIn(eve);
      await consentedAgo(grantId, 30 * 24 * 60 * 60_000);
      await h.db.oAuthGrant.update({ where: { id: grantId }, data: { lastUsedAt: new Date(Date.now() - (24 + i) * 60 * 60_000) } });
      old.push(grantId);
    }
    const firstMachine = await signedIn(eve);
    await consent(eve);
    expect(await revokedGrants(eve)).toEqual([{ id: old.at(-1), revokedReason: "superseded" }]);
    expect(await isLive(firstMachine.grantId)).toBe(true);
    expect((await h.anonymous.post("/v1/auth/refresh", { refresh_token: firstMachine.refreshToken })).status).toBe(200);
  });

  // The e-mail sign-in consents and redeems its code in two steps, as a browser's consent and its
  // app's exchange are: a consent in between must not revoke the grant the code is about to connect.
  it("a grant whose code can still be exchanged is never superseded, however recently the others were used", async () => {
    const fay = await h.user("Fay");
    const used: string[] = [];
    for (let i = 1; i < MAX_GRANTS_PER_CLIENT; i++) {
      const { grantId } = await signedIn(fay);
      await h.db.oAuthGrant.update({ where: { id: grantId }, data: { lastUsedAt: new Date(Date.now() + i * 1000) } });
      used.push(grantId);
    }
    const pending = await consent(fay);
    // Consented four minutes ago: its code has one more minute to be exchanged.
    await consentedAgo(pending.grantId, CODE_TTL_MS - 60_000);
    await consent(fay);
    expect(await revokedGrants(fay)).toEqual([{ id: used[0], revokedReason: "superseded" }]);
    expect((await h.anonymous.post("/v1/auth/exchange", { code: pending.code })).status).toBe(200);
  });

  // Pending grants are never taken, so without a refusal MAX_GRANTS_PER_CLIENT consents within a
  // code's lifetime, each redeemed afterwards, left more live grants than the cap.
  it("a consent past the cap when every place is a sign-in still to be redeemed is refused until one code is redeemed or expires", async () => {
    const gil = await h.user("Gil");
    const pending = [];
    for (let i = 0; i < MAX_GRANTS_PER_CLIENT; i++) pending.push(await consent(gil));
    const refused = await consent(gil).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe("rate_limited");
    expect(Number((refused as ApiError).headers?.["Retry-After"])).toBeGreaterThan(0);
    expect(await liveGrants(gil)).toBe(MAX_GRANTS_PER_CLIENT);
    // Every pending one is still redeemable, so the cap holds once they are all exchanged.
    for (const p of pending.slice(1)) expect((await h.anonymous.post("/v1/auth/exchange", { code: p.code })).status).toBe(200);
    // The first one's code expired unredeemed: its place can be taken again.
    await consentedAgo(pending[0]!.grantId, CODE_TTL_MS + 1000);
    await consent(gil);
    expect(await liveGrants(gil)).toBe(MAX_GRANTS_PER_CLIENT);
    expect(await revokedGrants(gil)).toEqual([{ id: pending[0]!.grantId, revokedReason: "superseded" }]);
  });
});

describe("a consent limited to some hubs", () => {
  // The consent form's hub_ids went in as posted: one in upper case matched none of the caller's hubs
  // (stored lower case) and was dropped, so the app got fewer hubs than the user chose.
  it("takes hub ids in any case, and a hub named twice once", async () => {
    const ann = await h.user("Ann");
    const team = await h.teamHub(ann);
    const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
    const other = await h.teamHub(ann);
    const code = await approveConsent(h.db, ann, request, { hubIds: [team.toUpperCase(), other, team], write: false }, new Date());
    const row = await h.db.oAuthCode.findUniqueOrThrow({ where: { codeHash: hashSecret(code) }, include: { grant: true } });
    expect(row.grant).toMatchObject({ hubIds: [team, other], allHubs: false });
  });
});

describe("the connected-apps list", () => {
  // It answered 100 a page by default; decisions.md's lists answer 20 unless asked for more (max 100).
  it("answers 20 by default, at most 100, in cursor pages", async () => {
    const ivy = await h.user("Ivy");
    const clients = Array.from({ length: 11 }, (_, i) => ({ id: `ec_list_${ivy.id}_${i}`, name: `List app ${i}`, redirectUris: ["https://app.example/cb"], kind: "registered" }));
    await h.db.oAuthClient.createMany({ data: clients });
    const start = Date.now() - 60_000;
    const grants = clients.flatMap((client, c) =>
      Array.from({ length: 10 }, (_, g) => ({ id: newId(), userId: ivy.id, clientId: client.id, hubIds: [], allHubs: true, scope: "read", resource: "http://engram.test/mcp", createdAt: new Date(start + c * 10 + g) })),
    );
    await h.db.oAuthGrant.createMany({ data: grants });
    await h.db.oAuthCode.createMany({
      data: grants.map((grant) => ({ codeHash: `list-${grant.id}`, grantId: grant.id, redirectUri: "https://app.example/cb", codeChallenge: "x", resource: grant.resource, expiresAt: new Date(Date.now() + 600_000) })),
    });
    const first = await ivy.get("/v1/auth/oauth-grants");
    expect(first.status).toBe(200);
    expect(first.body.data.grants).toHaveLength(20);
    expect(first.body.data.has_more).toBe(true);
    const second = await ivy.get(`/v1/auth/oauth-grants?cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(second.body.data.grants).toHaveLength(20);
    expect(second.body.data.grants[0].id).not.toBe(first.body.data.grants[0].id);
    const clamped = await ivy.get("/v1/auth/oauth-grants?limit=500");
    expect(clamped.body.data.grants).toHaveLength(100);
    expect(clamped.body.data.has_more).toBe(true);
    expect((await ivy.get("/v1/auth/oauth-grants?limit=0")).body.error.code).toBe("invalid_limit");
  });
});

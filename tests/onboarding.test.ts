import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthContext } from "@/lib/api/context.ts";
import { onboardingState } from "@/lib/onboarding/onboarding-state.ts";
import { restartOnboarding } from "@/lib/onboarding/restart-onboarding.ts";
import { hashSecret } from "@/lib/auth/hash-secret.ts";
import { approveConsent } from "@/lib/oauth/approve-consent.ts";
import { CLI_CLIENT_ID, ensureCliClient } from "@/lib/oauth/cli-client.ts";
import { findClient } from "@/lib/oauth/find-client.ts";
import { sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";

// The getting-started checklist (Memax's onboarding.state / restart, and a checklist's items through
// notifications.viewItem / completeItem), driven by Memax's SDK in process.

let h: Harness;
let Memax: any;
const sdkFor = (who: Client) => new Memax({ apiUrl: "http://engram.test", apiKey: who.key, fetch: routeFetch, maxRetries: 0 });
const items = (n: { payload: { items: { id: string }[] } }) => Object.fromEntries(n.payload.items.map((i) => [i.id, i])) as Record<string, any>;

async function checklist(who: Client) {
  const list = (await who.get("/v1/notifications?status=pending&kind=checklist")).body.data.notifications;
  return list[0];
}

beforeAll(async () => {
  h = await createHarness();
  ({ Memax } = await loadMemaxSdk());
});
afterAll(async () => {
  await h?.close();
});

describe("the getting-started checklist", () => {
  it("starts on restart, ticks itself off as the account is used, and resolves itself when the required steps are done", async () => {
    const ann = await h.user("Ann");
    const sdk = sdkFor(ann);
    expect(await sdk.onboarding.state()).toEqual({ has_prior: false, current_version: 0 });
    const started = await sdk.onboarding.restart();
    expect(started).toMatchObject({ kind: "checklist", status: "pending", source_kind: "onboarding", source_id: "v1", payload: { title: expect.any(String), required_ids: ["first_memory", "connect_agent", "first_recall", "five_memories"], version: 1 } });
    expect(Object.values(items(started)).every((i) => !i.completed_at)).toBe(true);
    expect(items(started).five_memories.progress).toEqual({ current: 0, target: 5 });
    expect(await sdk.onboarding.state()).toEqual({ has_prior: true, current_version: 1, current_status: "pending" });
    expect((await sdk.notifications.summary()).by_kind.checklist).toEqual({ pending: 1, unseen: 1 });

    await ann.post("/v1/memories", { content: "The first thing worth remembering." });
    let row = await checklist(ann);
    expect(items(row).first_memory.completed_at).toEqual(expect.any(String));
    expect(items(row).five_memories).toMatchObject({ progress: { current: 1, target: 5 } });
    expect(items(row).five_memories.completed_at).toBeUndefined();

    await ann.post("/v1/auth/api-keys", { name: "agent", agent_name: "claude-code" });
    await ann.post("/v1/recall", { query: "worth remembering" });
    for (const n of [2, 3, 4]) await ann.post("/v1/memories", { content: `Memory number ${n}.` });
    row = await checklist(ann);
    expect(items(row).connect_agent.completed_at).toEqual(expect.any(String));
    expect(items(row).first_recall.completed_at).toEqual(expect.any(String));
    expect(items(row).five_memories.progress).toEqual({ current: 4, target: 5 });
    // The optional step does not hold it open; the fifth memory closes it.
    await ann.post("/v1/memories", { content: "Memory number 5." });
    expect(await checklist(ann)).toBeUndefined();
    const resolved = (await ann.get("/v1/notifications?status=resolved&kind=checklist")).body.data.notifications[0];
    expect(resolved).toMatchObject({ status: "resolved", resolution: "applied_auto" });
    expect(items(resolved).invite_teammate.completed_at).toBeUndefined();
    expect(await sdk.onboarding.state()).toEqual({ has_prior: true, current_version: 1, current_status: "resolved" });
  });

  it("items are viewed and completed by hand, locks hold, and the last required one resolves the checklist", async () => {
    const bob = await h.user("Bob");
    const sdk = sdkFor(bob);
    const row = await sdk.onboarding.restart();
    const viewed = await sdk.notifications.viewItem(row.id, "first_recall");
    expect(viewed).toEqual({ item_id: "first_recall", viewed_at: expect.any(String) });
    expect(await sdk.notifications.viewItem(row.id, "first_recall")).toEqual(viewed);
    await expect(sdk.notifications.completeItem(row.id, "five_memories")).rejects.toMatchObject({ status: 400, code: "item_locked" });
    await expect(sdk.notifications.completeItem(row.id, "no_such_step")).rejects.toMatchObject({ status: 404 });
    for (const id of ["first_memory", "connect_agent", "first_recall"]) {
      expect(await sdk.notifications.completeItem(row.id, id)).toMatchObject({ item_id: id, completed_at: expect.any(String), viewed_at: expect.any(String) });
    }
    const last = await sdk.notifications.completeItem(row.id, "five_memories");
    expect(last).toMatchObject({ item_id: "five_memories", progress: { current: 5, target: 5 }, auto_resolved: true, auto_resolved_as: "applied_auto" });
    expect(await sdk.notifications.completeItem(row.id, "five_memories")).not.toHaveProperty("auto_resolved");
    expect((await bob.get("/v1/notifications?status=resolved&kind=checklist")).body.data.notifications[0].resolution).toBe("applied_auto");
  });

  it("restart dismisses the pending checklist and starts the next version, at most 3 times a day", async () => {
    const cyd = await h.user("Cyd");
    const sdk = sdkFor(cyd);
    const first = await sdk.onboarding.restart();
    const second = await sdk.onboarding.restart();
    expect(second).toMatchObject({ source_id: "v2", payload: { version: 2 } });
    const dismissed = (await cyd.get("/v1/notifications?status=resolved&kind=checklist")).body.data.notifications;
    expect(dismissed.map((n: { id: string; resolution: string }) => [n.id, n.resolution])).toEqual([[first.id, "dismissed"]]);
    await sdk.onboarding.restart();
    await expect(sdk.onboarding.restart()).rejects.toMatchObject({ status: 429 });
    expect(await sdk.onboarding.state()).toEqual({ has_prior: true, current_version: 3, current_status: "pending" });
    // A checklist is dismissed through /resolve, as Memax's inbox does.
    const pending = await checklist(cyd);
    expect((await cyd.post(`/v1/notifications/${pending.id}/resolve`, { action: "dismiss" })).body.data).toMatchObject({ resolution: "dismissed" });
  });

  it("a refused restart says in Retry-After (and details.retry_after) when the oldest of the day's restarts leaves the 24 hours", async () => {
    const fay = await h.user("Fay");
    for (let i = 0; i < 3; i++) expect((await fay.post("/v1/onboarding/restart", {})).status).toBe(201);
    // The oldest restart was 20 hours ago: room comes back in 4 hours, not in the fixed hour it said.
    const oldest = (await h.db.notification.findMany({ where: { userId: fay.id, kind: "checklist" }, orderBy: { createdAt: "asc" } }))[0]!;
    await h.db.notification.update({ where: { id: oldest.id }, data: { createdAt: new Date(Date.now() - 20 * 3_600_000) } });
    const refused = await fay.post("/v1/onboarding/restart", {});
    expect([refused.status, refused.body.error.code]).toEqual([429, "rate_limited"]);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(4 * 3600 - 10);
    expect(retryAfter).toBeLessThanOrEqual(4 * 3600);
    expect(refused.body.error.details).toEqual({ limit: 3, retry_after: retryAfter });
  });

  it("a restart whose refresh fails after its commit answers the restarted checklist, not a 500", async () => {
    const eva = await h.user("Eva");
    expect((await eva.post("/v1/memories", { content: "A first memory, so the new checklist has an item to tick." })).status).toBe(201);
    // The database refuses the refresh's tick of a pending checklist (a failover, a timeout): the
    // restart itself (a dismissal and a new row) has committed by then.
    await h.database.sql.exec(`CREATE FUNCTION refuse_tick() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF OLD.user_id = '${eva.id}'::uuid AND OLD.status = 'pending' AND NEW.status = 'pending' THEN RAISE EXCEPTION 'refused tick'; END IF;
        RETURN NEW; END $$;
      CREATE TRIGGER refuse_tick BEFORE UPDATE ON notifications FOR EACH ROW EXECUTE FUNCTION refuse_tick();`);
    try {
      const res = await eva.post("/v1/onboarding/restart");
      expect([res.status, res.body.data?.source_id, res.body.data?.status]).toEqual([201, "v1", "pending"]);
      expect(await h.db.notification.count({ where: { userId: eva.id, kind: "checklist" } })).toBe(1);
    } finally {
      await h.database.sql.exec(`DROP TRIGGER refuse_tick ON notifications; DROP FUNCTION refuse_tick();`);
    }
    // The next read ticks it.
    expect(items(await checklist(eva)).first_memory.completed_at).toEqual(expect.any(String));
  });

  it("other kinds have no items, and another user's checklist is not found", async () => {
    const dan = await h.user("Dan");
    const eve = await h.user("Eve");
    const row = await sdkFor(dan).onboarding.restart();
    expect((await eve.post(`/v1/notifications/${row.id}/items/first_memory/complete`, {})).status).toBe(404);
    const team = await h.teamHub(dan);
    expect((await dan.post(`/v1/hubs/${team}/invites`, { email: eve.email, role: "viewer" })).status).toBe(201);
    const invite = (await eve.get("/v1/notifications?kind=hub_invite")).body.data.notifications[0];
    const refused = await eve.post(`/v1/notifications/${invite.id}/items/x/view`, {});
    expect(refused).toMatchObject({ status: 400, body: { error: { code: "kind_not_supported" } } });
    // Sending that invite ticked Dan's optional step.
    expect(items(await checklist(dan)).invite_teammate.completed_at).toEqual(expect.any(String));
  });
});

describe("the connect-an-agent step and OAuth", () => {
  it("is not done by a consent whose code was never exchanged, and is once the code is exchanged", async () => {
    const gus = await h.user("Gus");
    await ensureCliClient(h.db);
    await sdkFor(gus).onboarding.restart();
    const request = { client: await findClient(h.db, CLI_CLIENT_ID, new Date()), redirectUri: "", state: undefined, codeChallenge: "", resource: "http://engram.test/mcp", wantsWrite: true };
    const code = await approveConsent(h.db, gus, request, { hubIds: null, write: true }, new Date());
    expect(await h.db.oAuthCode.findUnique({ where: { codeHash: hashSecret(code) } })).not.toBeNull();
    expect(items(await checklist(gus)).connect_agent.completed_at).toBeUndefined();
    expect((await h.anonymous.post("/v1/auth/exchange", { code })).status).toBe(200);
    expect(items(await checklist(gus)).connect_agent.completed_at).toEqual(expect.any(String));
  });
});

describe("restarts whose times do not follow their order", () => {
  // A restart that read the time before waiting for the user's lock (or a clock stepped back) stamps
  // its checklist before the one that went first. Versions still rise: each is the highest so far + 1.
  it("numbers each checklist one past the highest so far, never again an older one", async () => {
    const fay = await h.user("Fay");
    const base = Date.now();
    const at = (offsetMs: number): AuthContext => ({ ...sessionContext(h, fay), now: () => new Date(base + offsetMs) });
    const versions = [];
    for (const offset of [0, -1_000, -2_000]) versions.push((await restartOnboarding(at(offset))).source_id);
    expect(versions).toEqual(["v1", "v2", "v3"]);
    expect(await h.db.notification.count({ where: { userId: fay.id, kind: "checklist", status: "pending" } })).toBe(1);
    // The state names the newest version (stamped earliest here) and its status, not the newest row's.
    expect(await onboardingState(at(0))).toMatchObject({ has_prior: true, current_version: 3, current_status: "pending" });
  });
});

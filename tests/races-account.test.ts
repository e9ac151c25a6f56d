import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { newId } from "@/lib/ids.ts";
import { clientFor, createHarness, type ApiResponse, type Harness } from "./support/harness.ts";

/**
 * Races on this stop's account features that only a server with several connections can lose: each
 * claims a serialisation (a lock or a conditional write), and these send the requests truly at once
 * under `npm run test:postgres` (under `npm test` PGlite runs them one statement at a time).
 */
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterEach(() => {
  delete process.env.ENGRAM_EMAIL_CODE_DEV_RETURN;
});
afterAll(() => h.close());

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

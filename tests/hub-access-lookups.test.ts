import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AuthContext, Credential } from "@/lib/api/context.ts";
import { FULL_ACCESS } from "@/lib/api/context.ts";
import { hubScopeIds, targetHubOrThrow } from "@/lib/hubs/hub-access.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// withAuth's hub lookups (the personal hub, X-Hub-ID, a key's first allowed hub) and the hub scope of
// lists run as plain statements on every request: they must give the hub as Prisma's own read does,
// every field of it, with the same membership, role and allowlist checks.

let h: Harness;
let ann: Client;
let bob: Client;
let team: string;
let other: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  team = await h.teamHub(ann, [[bob, "contributor"]]);
  other = await h.teamHub(ann);
  await h.db.hub.update({
    where: { id: team },
    data: { icon: "rocket", accent: "violet", headerAuroraMode: "time", settings: { dreams_enabled: true }, allowContributorTopics: true, contributorDeletePolicy: "any" },
  });
});
afterAll(() => h.close());

function caller(user: Client, credential: Partial<Credential> = {}, hubHeader?: string): AuthContext {
  return {
    db: h.database.prisma,
    sql: h.database.sql,
    dbKind: h.database.kind,
    requestId: "test",
    now: () => new Date(),
    user: { id: user.id, email: user.email, name: user.name },
    credential: { type: "api_key", ...FULL_ACCESS, ...credential },
    hubHeader,
  };
}

async function stored(hubId: string) {
  const { deletedAt: _deleted, purgeFailedAt: _failed, ...hub } = await h.db.hub.findUniqueOrThrow({ where: { id: hubId } });
  return hub;
}

describe("the hub a request acts on", () => {
  test("the personal hub, with every field and the owner's role", async () => {
    const membership = await targetHubOrThrow(caller(ann), undefined, "memories.write");
    expect(membership).toEqual({ hub: await stored(ann.personalHubId), role: "owner", memberRole: "owner", connectedApp: false });
    expect(membership.hub.createdAt).toBeInstanceOf(Date);
  });

  test("the X-Hub-ID hub, with its settings and policy as stored", async () => {
    const membership = await targetHubOrThrow(caller(bob), team, "topics.manage");
    expect(membership).toEqual({ hub: await stored(team), role: "contributor", memberRole: "contributor", connectedApp: false });
    expect(membership.hub.settings).toEqual({ dreams_enabled: true });
  });

  test("settings as stored whatever JSON they hold (a string or array too, as Prisma gives them)", async () => {
    const cy = await h.user("Cy");
    const odd = await h.teamHub(cy);
    for (const settings of ["dark", ["a"], 7, { nested: { on: true } }]) {
      await h.db.hub.update({ where: { id: odd }, data: { settings } });
      expect((await targetHubOrThrow(caller(cy), odd, "memories.read")).hub).toEqual(await stored(odd));
    }
  });

  test("a read-only key acts as a viewer; a hub outside membership or allowlist is not found", async () => {
    await expect(targetHubOrThrow(caller(ann, { scopes: ["read"] }), team, "memories.write")).rejects.toMatchObject({ code: "forbidden" });
    await expect(targetHubOrThrow(caller(bob), other, "memories.read")).rejects.toMatchObject({ code: "not_found" });
    await expect(targetHubOrThrow(caller(ann, { hubIds: [other] }), team, "memories.read")).rejects.toMatchObject({ code: "not_found" });
    await expect(targetHubOrThrow(caller(ann), "not-a-uuid", "memories.read")).rejects.toMatchObject({ code: "not_found" });
  });

  test("a key limited to other hubs acts in the first of them it reaches", async () => {
    const membership = await targetHubOrThrow(caller(bob, { hubIds: [other, team] }), undefined, "memories.write");
    expect(membership.hub).toEqual(await stored(team));
    await expect(targetHubOrThrow(caller(bob, { hubIds: [other] }), undefined, "memories.read")).rejects.toMatchObject({ code: "not_found" });
  });

  test("a push without X-Hub-ID lands in the personal hub, with one in the hub it names", async () => {
    const own = await ann.post("/v1/memories", { content: "personal note" });
    expect(own.status, own.text).toBe(201);
    expect(own.body.data.hub_id).toBe(ann.personalHubId);
    const named = await bob.post("/v1/memories", { content: "team note" }, { headers: { "x-hub-id": team } });
    expect(named.status, named.text).toBe(201);
    expect(named.body.data.hub_id).toBe(team);
  });
});

describe("the hubs a list reads", () => {
  test("every hub the caller belongs to, narrowed to the key's allowlist", async () => {
    expect(new Set(await hubScopeIds(caller(ann), undefined))).toEqual(new Set([ann.personalHubId, team, other]));
    expect(new Set(await hubScopeIds(caller(bob), undefined))).toEqual(new Set([bob.personalHubId, team]));
    expect(await hubScopeIds(caller(ann, { hubIds: [other, bob.personalHubId] }), undefined)).toEqual([other]);
  });

  test("hub_id or X-Hub-ID narrows to one hub the caller reaches; others are not found", async () => {
    expect(await hubScopeIds(caller(ann), team)).toEqual([team]);
    expect(await hubScopeIds(caller(ann, {}, other), undefined)).toEqual([other]);
    await expect(hubScopeIds(caller(bob), other)).rejects.toMatchObject({ code: "not_found" });
    await expect(hubScopeIds(caller(bob), "team-slug")).rejects.toMatchObject({ code: "invalid_request" });
  });
});

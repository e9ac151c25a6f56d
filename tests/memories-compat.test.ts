import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { analyzeQuery } from "@/lib/recall/analyze-query.ts";
import { formatAge } from "@/lib/recall/format-age.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";

// What Memax's clients ask of the memories API beyond the basics: list filters and X-Hub-ID,
// batch-move clearing a topic, and the caller's time zone in recall.

let h: Harness;
let ann: Client;
let bob: Client;
let team: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  team = await h.teamHub(ann, [[bob, "contributor"]]);
});
afterAll(() => h.close());

async function push(client: Client, body: Record<string, unknown>, hubId?: string): Promise<string> {
  const res = await client.post("/v1/memories", body, hubId ? { headers: { "x-hub-id": hubId } } : {});
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

const ids = (res: { body: any }) => res.body.data.memories.map((m: any) => m.id);

describe("GET /v1/memories filters", () => {
  const made: Record<string, string> = {};

  beforeAll(async () => {
    made.annOld = await push(ann, { content: "how to rotate the TLS certificates", kind: "procedural", source: "import", created_at: "2026-01-10T10:00:00Z" }, team);
    made.annNew = await push(ann, { content: "we chose Postgres because of pgvector", kind: "rationale" }, team);
    made.bobs = await push(bob, { content: "bob's note about the on-call rota", kind: "episodic" }, team);
    made.personal = await push(ann, { content: "a personal procedure", kind: "procedural" });
  });

  test("X-Hub-ID narrows the list when hub_id is absent; hub_id wins over it", async () => {
    const byHeader = await ann.get("/v1/memories", { headers: { "x-hub-id": team } });
    expect(new Set(ids(byHeader))).toEqual(new Set([made.annOld, made.annNew, made.bobs]));
    expect(byHeader.body.data.total).toBe(3);
    const both = await ann.get(`/v1/memories?hub_id=${ann.personalHubId}`, { headers: { "x-hub-id": team } });
    expect(ids(both)).toEqual([made.personal]);
    expect((await ann.get("/v1/memories", { headers: { "x-hub-id": "my-slug" } })).status).toBe(400);
    expect((await bob.get("/v1/memories", { headers: { "x-hub-id": ann.personalHubId } })).status).toBe(404);
  });

  test("kind, actor, created_after and created_before filter (and combine)", async () => {
    expect(new Set(ids(await ann.get("/v1/memories?kind=procedural")))).toEqual(new Set([made.annOld, made.personal]));
    expect(ids(await ann.get(`/v1/memories?actor=${bob.id}`))).toEqual([made.bobs]);
    const old = await ann.get("/v1/memories?created_before=2026-02-01T00:00:00Z");
    expect(ids(old)).toEqual([made.annOld]);
    expect(old.body.data.total).toBe(1);
    expect(ids(await ann.get("/v1/memories?created_after=2026-02-01T00:00:00Z&kind=procedural"))).toEqual([made.personal]);
    expect(ids(await ann.get(`/v1/memories?created_after=2026-01-10T09:00:00Z&created_before=2026-01-10T11:00:00Z&actor=${ann.id}`))).toEqual([made.annOld]);
  });

  test("created_after is inclusive and created_before exclusive, in the list (one hub or several) as in recall", async () => {
    // annOld was created at exactly 2026-01-10T10:00:00Z: [after, before) holds it when after is that instant.
    const at = "2026-01-10T10:00:00Z";
    for (const scope of [`hub_id=${team}&`, ""]) {
      const from = await ann.get(`/v1/memories?${scope}created_after=${at}&created_before=2026-01-10T10:00:01Z`);
      expect(ids(from), scope || "every hub").toEqual([made.annOld]);
      expect(from.body.data.total).toBe(1);
      expect(ids(await ann.get(`/v1/memories?${scope}created_before=${at}`)), scope || "every hub").toEqual([]);
    }
    await startBackgroundProcessing();
    try {
      await waitProcessed(h.db, ann, made.annOld!);
    } finally {
      stopBackgroundProcessing();
    }
    const recalled = async (filters: Record<string, string>) =>
      (await ann.post("/v1/recall", { query: "rotate the TLS certificates", hub_ids: [team], no_rerank: true, ...filters })).body.data.memories.map((m: any) => m.id);
    expect(await recalled({ created_after: at })).toContain(made.annOld);
    expect(await recalled({ created_before: at })).not.toContain(made.annOld);
  });

  test("bad filter values are 400 at their parameter; empty ones mean absent", async () => {
    for (const [query, path] of [
      ["kind=fact", "kind"],
      ["actor=bob", "actor"],
      ["created_after=yesterday", "created_after"],
    ]) {
      const res = await ann.get(`/v1/memories?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.error.details.issues[0].path).toBe(path);
    }
    expect((await ann.get("/v1/memories?kind=&actor=&created_after=")).body.data.total).toBe(4);
    const unknown = await ann.get("/v1/memories?flavour=vanilla");
    expect(unknown.status).toBe(200);
    expect(unknown.headers.get("x-engram-warning")).toBe("ignored unknown query parameters: flavour");
  });
});

describe("POST /v1/memories/batch-move", () => {
  test("with only the memories' own hub_id, their topic is cleared", async () => {
    const topic = (await ann.post("/v1/topics", { name: "Runbooks", hub_id: team })).body.data.id;
    const a = await push(ann, { content: "runbook one" }, team);
    const b = await push(ann, { content: "runbook two" }, team);
    expect((await ann.post("/v1/memories/batch-move", { ids: [a, b], topic_id: topic })).body.data.moved).toBe(2);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: a } })).topicId).toBe(topic);
    const cleared = await ann.post("/v1/memories/batch-move", { ids: [a, b], hub_id: team });
    expect(cleared.body.data).toEqual({ moved: 2, skipped: [] });
    const rows = await h.db.memory.findMany({ where: { id: { in: [a, b] } } });
    expect(rows.map((m) => [m.hubId, m.topicId])).toEqual([
      [team, null],
      [team, null],
    ]);
  });

  test("someone else's memory is skipped as not_owned (Memax's reason)", async () => {
    const bobs = await push(bob, { content: "bob owns this one" }, team);
    const res = await (await h.user("Cleo")).post("/v1/memories/batch-move", { ids: [bobs], hub_id: team });
    expect(res.status).toBe(404);
    const viewer = await h.user("Vic");
    await h.db.hubMember.create({ data: { hubId: team, userId: viewer.id, role: "contributor" } });
    const skipped = await viewer.post("/v1/memories/batch-move", { ids: [bobs], hub_id: team });
    expect(skipped.body.data).toEqual({ moved: 0, skipped: [{ id: bobs, reason: "not_owned" }] });
  });
});

describe("POST /v1/memories/batch-move skip reasons (Memax's BatchMoveSkipReason)", () => {
  test("a memory already in the target hub and topic is skipped as already_at_target", async () => {
    const a = await push(ann, { content: "already where it belongs" }, team);
    const res = await ann.post("/v1/memories/batch-move", { ids: [a], hub_id: team });
    expect(res.body.data).toEqual({ moved: 0, skipped: [{ id: a, reason: "already_at_target" }] });
  });

  // A move to another hub deletes the memory from its source hub, so that hub's policy applies.
  test("leaving a hub needs delete rights there: source_delete_forbidden under contributor_delete_policy none", async () => {
    const setPolicy = async (policy: string) => expect((await ann.patch(`/v1/hubs/${team}`, { contributor_delete_policy: policy })).status).toBe(200);
    const bobsPersonal = (await bob.get("/v1/auth/me")).body.data.personal_hub_id;
    const topic = (await ann.post("/v1/topics", { name: "Bob's shelf", hub_id: team })).body.data.id;
    const mine = await push(bob, { content: "bob's own team note, to take home" }, team);
    try {
      await setPolicy("none");
      const refused = await bob.post("/v1/memories/batch-move", { ids: [mine], hub_id: bobsPersonal });
      expect(refused.body.data).toEqual({ moved: 0, skipped: [{ id: mine, reason: "source_delete_forbidden" }] });
      expect((await h.db.memory.findUniqueOrThrow({ where: { id: mine } })).hubId).toBe(team);
      // Within the hub (a topic) nothing leaves it: allowed.
      expect((await bob.post("/v1/memories/batch-move", { ids: [mine], topic_id: topic })).body.data).toEqual({ moved: 1, skipped: [] });
      await setPolicy("own");
      expect((await bob.post("/v1/memories/batch-move", { ids: [mine], hub_id: bobsPersonal })).body.data).toEqual({ moved: 1, skipped: [] });
      expect((await h.db.memory.findUniqueOrThrow({ where: { id: mine } })).hubId).toBe(bobsPersonal);
    } finally {
      await setPolicy("own");
    }
  });
});

describe("X-Timezone", () => {
  // Tuning-free: pure calendar arithmetic, checked against hand-computed instants.
  const now = new Date("2026-03-10T03:30:00Z"); // 2026-03-09 20:30 in Los Angeles (PDT, UTC-7)

  test('"yesterday" and "today" fall on the caller\'s calendar', () => {
    const utc = analyzeQuery("deploy notes from yesterday", now, []);
    expect([utc.createdAfter?.toISOString(), utc.createdBefore?.toISOString()]).toEqual(["2026-03-09T00:00:00.000Z", "2026-03-10T00:00:00.000Z"]);
    const la = analyzeQuery("deploy notes from yesterday", now, [], "America/Los_Angeles");
    // PST until 2026-03-08 02:00, PDT after: midnight of the 8th is 08:00Z, of the 9th 07:00Z.
    expect([la.createdAfter?.toISOString(), la.createdBefore?.toISOString()]).toEqual(["2026-03-08T08:00:00.000Z", "2026-03-09T07:00:00.000Z"]);
    const tokyo = analyzeQuery("what happened today", now, [], "Asia/Tokyo");
    expect(tokyo.createdAfter?.toISOString()).toBe("2026-03-09T15:00:00.000Z");
    const month = analyzeQuery("decisions this month", new Date("2026-03-31T23:30:00Z"), [], "Asia/Tokyo");
    expect(month.createdAfter?.toISOString()).toBe("2026-03-31T15:00:00.000Z"); // already April 1st in Tokyo
  });

  test('a year before 100 ("in March 0050") is that year, not 1900 + it (Date.UTC\'s two-digit years)', () => {
    const utc = analyzeQuery("the harbour records in March 0050", now, []);
    expect([utc.createdAfter?.toISOString(), utc.createdBefore?.toISOString()]).toEqual(["0050-03-01T00:00:00.000Z", "0050-04-01T00:00:00.000Z"]);
    const since = analyzeQuery("everything since December 0099", now, []);
    expect([since.createdAfter?.toISOString(), since.createdBefore]).toEqual(["0099-12-01T00:00:00.000Z", undefined]);
    // Through a zone the year survives too (its offset was computed from 1950's calendar): Tokyo was UTC+9:18:59 then.
    const tokyo = analyzeQuery("the harbour records in March 0050", now, [], "Asia/Tokyo");
    expect(tokyo.createdAfter?.getUTCFullYear()).toBe(50);
    expect(tokyo.createdAfter!.getTime() - Date.parse("0050-03-01T00:00:00.000Z")).toBe(-(9 * 3600 + 18 * 60 + 59) * 1000);
  });

  test("ages past a day count the caller's calendar days", () => {
    const created = new Date("2026-03-08T06:30:00Z"); // 23:30 on the 7th in LA, 06:30 on the 8th in UTC
    expect(formatAge(created, now)).toBe("2 days ago");
    expect(formatAge(created, now, "America/Los_Angeles")).toBe("2 days ago");
    expect(formatAge(new Date("2026-03-09T02:00:00Z"), now, "America/Los_Angeles")).toBe("1 day ago");
    expect(formatAge(new Date("2026-03-09T02:00:00Z"), now, "Asia/Tokyo")).toBe("1 day ago");
    expect(formatAge(new Date("2026-03-10T03:00:00Z"), now, "Asia/Tokyo")).toBe("30 minutes ago");
  });

  test("every unit of age, singular and plural (decisions.md's wording)", () => {
    const ago = (ms: number) => formatAge(new Date(now.getTime() - ms), now);
    const MIN = 60_000;
    const HOUR = 60 * MIN;
    const DAY = 24 * HOUR;
    expect([ago(0), ago(59_000), ago(MIN), ago(2 * MIN), ago(59 * MIN)]).toEqual(["just now", "just now", "1 minute ago", "2 minutes ago", "59 minutes ago"]);
    expect([ago(HOUR), ago(5 * HOUR), ago(23 * HOUR)]).toEqual(["1 hour ago", "5 hours ago", "23 hours ago"]);
    expect([ago(29 * DAY)]).toEqual(["29 days ago"]);
    expect([ago(30 * DAY), ago(95 * DAY), ago(364 * DAY)]).toEqual(["1 month ago", "3 months ago", "12 months ago"]);
    expect([ago(365 * DAY), ago(3 * 365 * DAY)]).toEqual(["1 year ago", "3 years ago"]);
    // A clock a little behind the stored time (another server's) is not "in the future".
    expect(formatAge(new Date(now.getTime() + 5_000), now)).toBe("just now");
  });

  test("recall applies it to its time filter", async () => {
    const res = await ann.post("/v1/recall", { query: "notes from yesterday", no_rerank: true }, { headers: { "x-timezone": "Asia/Tokyo" } });
    expect(res.status).toBe(200);
    const after = new Date(res.body.data.query_metadata.filters.created_after);
    // Tokyo midnight is 15:00 UTC.
    expect(after.getUTCHours()).toBe(15);
    const utc = await ann.post("/v1/recall", { query: "notes from yesterday", no_rerank: true });
    expect(new Date(utc.body.data.query_metadata.filters.created_after).getUTCHours()).toBe(0);
  });
});

describe("batch endpoints take ids in any case, as GET /v1/memories/{id} does", () => {
  test("an UPPERCASE id is deleted or moved, not skipped as not_found; the reply names it in lowercase", async () => {
    const a = await push(ann, { content: "shouted id, to move" }, team);
    const b = await push(ann, { content: "shouted id, to delete" }, team);
    expect((await ann.get(`/v1/memories/${a.toUpperCase()}`)).status).toBe(200);
    const moved = await ann.post("/v1/memories/batch-move", { ids: [a.toUpperCase()], hub_id: ann.personalHubId.toUpperCase() });
    expect(moved.body.data).toEqual({ moved: 1, skipped: [] });
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: a } })).hubId).toBe(ann.personalHubId);
    const deleted = await ann.post("/v1/memories/batch-delete", { ids: [b.toUpperCase(), b, "not-an-id"] });
    expect(deleted.body.data).toEqual({ deleted: 1, skipped: [{ id: "not-an-id", reason: "not_found" }] });
    expect(await h.db.memory.findUnique({ where: { id: b } })).toBeNull();
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resetConfig } from "@/lib/config.ts";
import pg from "pg";
import { clientFor, createHarness, testPostgres, type ApiResponse, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";

let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});
afterAll(async () => {
  delete process.env.ENGRAM_RATE_LIMIT_HEAVY;
  resetConfig();
  await h?.close();
});

describe("GET/PATCH /v1/settings", () => {
  it("starts from defaults and merges known keys", async () => {
    // Every field Memax's SDK Settings requires, at what a dream run does when nothing was saved.
    expect((await ann.get("/v1/settings")).body.data).toEqual({
      theme: "system",
      locale: "",
      notifications_enabled: true,
      chat_default_persona_id: "",
      dreams_enabled: true,
      dreams_merge_enabled: true,
      dreams_archive_enabled: true,
      dreams_organize_enabled: true,
      dreams_restructure_enabled: true,
      dreams_excluded_kinds: [],
      dreams_similarity_threshold: 0.9,
      dreams_staleness_days: 90,
      hub_header_aurora_mode: "signature",
      pulse_hidden_hub_ids: [],
      dev_flags: { mockDreams: false, mockDreaming: false, mockEmptyInbox: false, mockProUser: false, debuggerEnabled: false, skipRerank: false },
      updated_at: null,
    });
    const res = await ann.patch("/v1/settings", { theme: "dark", notifications_enabled: false });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ theme: "dark", locale: "", notifications_enabled: false, updated_at: expect.any(String) });
    expect((await ann.patch("/v1/settings", { locale: "zh" })).body.data).toMatchObject({ theme: "dark", locale: "zh", notifications_enabled: false });
    expect((await ann.patch("/v1/settings", { locale: "" })).body.data.locale).toBe("");
    // Per user.
    expect((await bob.get("/v1/settings")).body.data.theme).toBe("system");
  });

  it("refuses bad values (saving nothing) and ignores unknown keys with a warning", async () => {
    // Unknown keys follow the API-wide rule (decisions.md): ignored and named in X-Engram-Warning, never saved.
    const unknown = await ann.patch("/v1/settings", { theme: "dark", dreams_cadence: "hourly" });
    expect(unknown.status).toBe(200);
    expect(unknown.headers.get("x-engram-warning") ?? "").toMatch(/dreams_cadence/);
    expect(unknown.body.data).not.toHaveProperty("dreams_cadence");
    expect((await ann.patch("/v1/settings", { theme: "purple" })).status).toBe(400);
    expect((await ann.patch("/v1/settings", { notifications_enabled: "yes" })).status).toBe(400);
    // A persona id that cannot be one is a malformed value (400), not a persona that is not there (404).
    const notAnId = await ann.patch("/v1/settings", { chat_default_persona_id: "captain" });
    expect([notAnId.status, notAnId.body.error?.code]).toEqual([400, "invalid_request"]);
    expect((await ann.patch("/v1/settings", { locale: "English!" })).status).toBe(400);
    // Well-formed subtags, but megabytes of them: a language tag has a size.
    const huge = await ann.patch("/v1/settings", { locale: `en${"-abcdefgh".repeat(100_000)}` });
    expect(huge.status).toBe(400);
    expect(huge.body.error.details.issues[0].path).toBe("locale");
    expect((await ann.patch("/v1/settings", { locale: "zh-Hant-TW" })).body.data.locale).toBe("zh-Hant-TW");
    expect((await ann.patch("/v1/settings", [])).body.error.code).toBe("invalid_json");
    expect((await ann.get("/v1/settings")).body.data.theme).toBe("dark");
    expect((await h.anonymous.get("/v1/settings")).status).toBe(401);
  });

  it("stores the dream settings, aurora, pulse and dev flags of Memax's SettingsUpdateInput, refusing out-of-range values by name", async () => {
    const dan = await h.user("Dan");
    const hubId = "0F0E0D0C-0B0A-4909-8807-060504030201";
    const res = await dan.patch("/v1/settings", {
      dreams_excluded_kinds: ["procedural", "rationale", "procedural"],
      dreams_similarity_threshold: 0.8,
      dreams_staleness_days: 30,
      hub_header_aurora_mode: "time",
      pulse_hidden_hub_ids: [hubId, hubId.toLowerCase()],
      dev_flags: { mockDreams: true },
    });
    expect(res.status, res.text).toBe(200);
    const saved = {
      dreams_excluded_kinds: ["procedural", "rationale"],
      dreams_similarity_threshold: 0.8,
      dreams_staleness_days: 30,
      hub_header_aurora_mode: "time",
      pulse_hidden_hub_ids: [hubId.toLowerCase()],
      dev_flags: { mockDreams: true, mockDreaming: false, mockEmptyInbox: false, mockProUser: false, debuggerEnabled: false, skipRerank: false },
    };
    expect(res.body.data).toMatchObject(saved);
    // The five dream switches are per hub (Memax's SDK: refused here by this code, PATCH /v1/hubs/{id} instead);
    // GET answers the personal hub's, on until it has its own.
    const moved = await dan.patch("/v1/settings", { dreams_enabled: false, dreams_merge_enabled: false, theme: "dark" });
    expect([moved.status, moved.body.error?.code, moved.body.error?.details?.fields]).toEqual([400, "moved_to_hub_settings", ["dreams_enabled", "dreams_merge_enabled"]]);
    expect(moved.body.error.message).toContain("/v1/hubs/");
    expect((await dan.get("/v1/settings")).body.data).toMatchObject({ theme: "system", dreams_enabled: true, dreams_merge_enabled: true });
    const own = await dan.patch(`/v1/hubs/${dan.personalHubId}`, { settings: { dreams_enabled: false, dreams_archive_enabled: false } });
    expect(own.status, own.text).toBe(200);
    expect((await dan.get("/v1/settings")).body.data).toMatchObject({ dreams_enabled: false, dreams_merge_enabled: true, dreams_archive_enabled: false, dreams_organize_enabled: true });
    // null puts the install's own back (what GET answers while unset): a saved value need not pin it for good.
    const cleared = await dan.patch("/v1/settings", { dreams_similarity_threshold: null, dreams_staleness_days: null });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.body.data).toMatchObject({ dreams_similarity_threshold: 0.9, dreams_staleness_days: 90 });
    expect(await h.db.userSetting.findUniqueOrThrow({ where: { userId: dan.id } })).toMatchObject({ dreamsSimilarityThreshold: null, dreamsStalenessDays: null });
    expect((await dan.patch("/v1/settings", { dreams_similarity_threshold: 0.8, dreams_staleness_days: 30 })).status).toBe(200);
    // Flags merge one by one; the rest of what was saved stays.
    const flipped = await dan.patch("/v1/settings", { dev_flags: { skipRerank: true } });
    expect(flipped.body.data.dev_flags).toMatchObject({ mockDreams: true, skipRerank: true });
    expect((await dan.get("/v1/settings")).body.data).toMatchObject({ ...saved, dev_flags: { ...saved.dev_flags, skipRerank: true } });
    const refused: [object, string][] = [
      [{ dreams_similarity_threshold: 0.3 }, "dreams_similarity_threshold"],
      [{ dreams_similarity_threshold: 1 }, "dreams_similarity_threshold"],
      [{ dreams_staleness_days: 3 }, "dreams_staleness_days"],
      [{ dreams_staleness_days: 4000 }, "dreams_staleness_days"],
      [{ dreams_staleness_days: 30.5 }, "dreams_staleness_days"],
      [{ dreams_excluded_kinds: ["gossip"] }, "dreams_excluded_kinds.0"],
      [{ dreams_enabled: "no" }, "dreams_enabled"],
      [{ hub_header_aurora_mode: "loud" }, "hub_header_aurora_mode"],
      [{ pulse_hidden_hub_ids: ["not-a-hub"] }, "pulse_hidden_hub_ids.0"],
      [{ pulse_hidden_hub_ids: Array.from({ length: 201 }, () => hubId) }, "pulse_hidden_hub_ids"],
      [{ dev_flags: { mockDreams: "yes" } }, "dev_flags.mockDreams"],
    ];
    for (const [body, path] of refused) {
      const bad = await dan.patch("/v1/settings", body);
      expect([bad.status, bad.body.error?.code, bad.body.error?.details?.issues?.[0]?.path], JSON.stringify(body)).toEqual([400, "invalid_request", path]);
      expect(bad.body.error.message).toContain(path.split(".")[0]);
    }
    expect((await dan.get("/v1/settings")).body.data).toMatchObject({ dreams_similarity_threshold: 0.8, dreams_staleness_days: 30, dreams_excluded_kinds: ["procedural", "rationale"] });
  });

  it.skipIf(!testPostgres())("two first PATCHes of dev_flags at once both keep their flag", async () => {
    const fay = await h.user("Fay");
    const client = new pg.Client({ connectionString: h.url! });
    await client.connect();
    let patch: Promise<ApiResponse> | undefined;
    try {
      // Another PATCH of Fay's (her first) has written her row and not committed yet.
      await client.query("BEGIN");
      await client.query(`INSERT INTO user_settings (user_id, dev_flags, updated_at) VALUES ($1, '{"mockDreams": true}', now())`, [fay.id]);
      patch = fay.patch("/v1/settings", { dev_flags: { skipRerank: true } });
      for (let waited = 0; ; waited += 20) {
        const { rows } = await client.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))");
        if (rows[0].n >= 1) break;
        if (waited > 20_000) throw new Error("the PATCH never waited for the other");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await client.query("COMMIT");
    } finally {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    }
    expect((await patch!).status).toBe(200);
    expect((await fay.get("/v1/settings")).body.data.dev_flags).toMatchObject({ mockDreams: true, skipRerank: true });
  });

  it("a read-modify-write of the whole object through Memax's SDK leaves the dream tuning to the install", async () => {
    const gil = await h.user("Gil");
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: gil.key, fetch: routeFetch });
    // What a dashboard does: read everything, flip one field, send every updatable field back.
    // (The dream switches are set per hub and refused here, and updated_at is the server's.)
    const read = await sdk.settings.get();
    const rest = Object.fromEntries(Object.entries(read).filter(([key]) => !key.startsWith("dreams_") || !key.endsWith("_enabled")).filter(([key]) => key !== "updated_at"));
    expect(rest).toMatchObject({ dreams_similarity_threshold: 0.9, dreams_staleness_days: 90 });
    expect((await sdk.settings.update({ ...rest, theme: "dark" })).theme).toBe("dark");
    expect(await h.db.userSetting.findUniqueOrThrow({ where: { userId: gil.id } })).toMatchObject({ theme: "dark", dreamsSimilarityThreshold: null, dreamsStalenessDays: null });
    process.env.ENGRAM_DREAM_STALE_DAYS = "120";
    try {
      // The operator's later change reaches her: she never chose a number of days.
      expect(await sdk.settings.get()).toMatchObject({ theme: "dark", dreams_staleness_days: 120, dreams_similarity_threshold: 0.9 });
      // A value she does choose is hers, and one she saved stays hers when sent back unchanged.
      expect(await sdk.settings.update({ dreams_staleness_days: 90 })).toMatchObject({ dreams_staleness_days: 90 });
      expect(await sdk.settings.update({ ...rest, dreams_staleness_days: 90, theme: "light" })).toMatchObject({ dreams_staleness_days: 90 });
    } finally {
      delete process.env.ENGRAM_DREAM_STALE_DAYS;
    }
    expect(await sdk.settings.get()).toMatchObject({ theme: "light", dreams_staleness_days: 90 });
    expect(await h.db.userSetting.findUniqueOrThrow({ where: { userId: gil.id } })).toMatchObject({ dreamsSimilarityThreshold: null, dreamsStalenessDays: 90 });
  });

  it("keeps a default persona named in upper case as the persona's own id", async () => {
    const cat = await h.user("Cat");
    const persona = await cat.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "SOUL.md", content: "# Captain\nSpeak like a ship's captain." });
    expect(persona.status).toBe(201);
    const id: string = persona.body.data.id;
    // UUIDs are case-insensitive (tests/uuid-case.test.ts): the upper-case form names the same persona,
    // and what is stored and answered is its id as GET /v1/personas lists it, which clients compare to.
    const res = await cat.patch("/v1/settings", { chat_default_persona_id: id.toUpperCase() });
    expect([res.status, res.body.data?.chat_default_persona_id]).toEqual([200, id]);
    expect((await cat.get("/v1/settings")).body.data.chat_default_persona_id).toBe(id);
    expect(((await cat.get("/v1/personas")).body.data.personas as { id: string }[]).map((p) => p.id)).toContain(id);
  });
});

describe("GET /v1/usage", () => {
  it("counts pushes, recalls and asks of the period, memories and storage, and reports the limits", async () => {
    process.env.ENGRAM_RATE_LIMIT_HEAVY = "42";
    resetConfig();
    const contents = ["first note about deploys", "second note about rollbacks", "third — ünïcödé"];
    for (const content of contents) expect((await bob.post("/v1/memories", { content })).status).toBe(201);
    // A duplicate is not a new push into storage but is still a push call.
    expect((await bob.post("/v1/memories", { content: contents[0] })).status).toBe(200);
    await bob.post("/v1/recall", { query: "deploys" });
    await bob.post("/v1/recall", { query: "rollbacks" });
    await bob.post("/v1/ask", { query: "how do rollbacks work?" });
    // Refused calls are not counted.
    expect((await bob.post("/v1/recall", { query: "" })).status).toBe(400);
    const usage = (await bob.get("/v1/usage")).body.data;
    const now = new Date();
    expect(usage).toMatchObject({
      user_id: bob.id,
      period_start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString(),
      push_count: 4,
      recall_count: 2,
      ask_count: 1,
      memory_count: 3,
      storage_bytes: contents.reduce((n, c) => n + Buffer.byteLength(c), 0),
      plan: "self_hosted",
    });
    expect(usage.limits).toMatchObject({
      // The quotas enforced (lib/quotas defaults; 0 in the environment would make them -1).
      memory_limit: 100_000,
      storage_bytes_limit: 1024 ** 3,
      max_team_hubs: 99,
      rate_limit_rpm: 300,
      rate_limit_heavy_rpm: 42,
      rate_limit_light_rpm: 600,
      max_attachment_bytes: 25 * 1024 * 1024,
      max_memory_content_bytes: 3 * 1024 * 1024,
    });
    // /v1/auth/me's usage reads the same counters.
    expect((await bob.get("/v1/auth/me")).body.data.usage).toEqual({
      user_id: bob.id,
      period_start: usage.period_start,
      period_end: usage.period_end,
      push_count: 4,
      recall_count: 2,
      ask_count: 1,
    });
    // Another user's numbers are their own.
    expect((await ann.get("/v1/usage")).body.data).toMatchObject({ push_count: 0, recall_count: 0, ask_count: 0, memory_count: 0 });
  });

  it("a key limited to some hubs cannot read the account-wide usage, on /v1/usage or /v1/auth/me", async () => {
    const cat = await h.user("Cat");
    const team = await h.teamHub(cat);
    expect((await cat.post("/v1/memories", { content: "in the personal hub, out of the team key's reach" })).status).toBe(201);
    const teamKey = clientFor((await cat.post("/v1/auth/api-keys", { name: "team bot", hub_id: team })).body.data.key);
    const refused = await teamKey.get("/v1/usage");
    expect([refused.status, refused.body.error?.code]).toEqual([403, "forbidden"]);
    const me = await teamKey.get("/v1/auth/me");
    expect(me.status).toBe(200);
    expect(me.body.data).not.toHaveProperty("usage");
    // A key for the whole account still reads both.
    expect((await cat.get("/v1/usage")).body.data).toMatchObject({ push_count: 1, memory_count: 1 });
    expect((await cat.get("/v1/auth/me")).body.data.usage).toMatchObject({ push_count: 1 });
  });

  it("reports the synced config files' byte cap and what the account's kept versions take", async () => {
    const dot = await h.user("Dot");
    process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES = "64k";
    try {
      const content = "# house rules\nkeep it short — ünïcödé\n";
      const put = await dot.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "CLAUDE.md", content });
      expect(put.status, JSON.stringify(put.body)).toBeLessThan(300);
      const usage = (await dot.get("/v1/usage")).body.data;
      expect(usage.config_bytes).toBe(Buffer.byteLength(content));
      expect(usage.limits.config_bytes_limit).toBe(64 * 1024);
      const [personal, hub] = (await dot.get("/v1/plans")).body.data;
      expect(personal.features.config_bytes_limit).toBe(64 * 1024);
      expect(hub.features).not.toHaveProperty("config_bytes_limit");
      // Another account's files are not this one's.
      expect((await ann.get("/v1/usage")).body.data.config_bytes).toBe(0);
      process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES = "0";
      expect((await dot.get("/v1/usage")).body.data.limits.config_bytes_limit).toBe(-1);
    } finally {
      delete process.env.ENGRAM_QUOTA_USER_CONFIG_BYTES;
    }
  });

  it("Memax's SDK reads settings and usage", async () => {
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: bob.key, fetch: routeFetch });
    expect((await sdk.settings.update({ theme: "light" })).theme).toBe("light");
    expect((await sdk.settings.get()).theme).toBe("light");
    // The SDK's dream tuning: kept in range, refused by name out of it (the SDK throws the 400).
    const tooShort = await sdk.settings.update({ dreams_staleness_days: 3 }).catch((e: Error) => e);
    expect([(tooShort as any).status, (tooShort as Error).message]).toEqual([400, expect.stringContaining("dreams_staleness_days")]);
    expect(await sdk.settings.update({ dreams_staleness_days: 30, dreams_excluded_kinds: ["rationale"] })).toMatchObject({ dreams_staleness_days: 30, dreams_excluded_kinds: ["rationale"] });
    expect(await sdk.settings.get()).toMatchObject({ dreams_enabled: true, dreams_merge_enabled: true, dreams_archive_enabled: true, dreams_similarity_threshold: 0.9, dreams_staleness_days: 30 });
    const usage = await sdk.settings.usage();
    expect(usage.push_count).toBe(4);
    expect(usage.limits.rate_limit_heavy_rpm).toBe(42);
  });
});

describe("GET /v1/plans", () => {
  it("answers the install's two free plans with the limits it enforces, as Memax's SDK reads them", async () => {
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = "500";
    try {
      const res = await ann.get("/v1/plans");
      expect(res.status).toBe(200);
      const [personal, hub] = res.body.data;
      expect(personal).toMatchObject({ id: "self_hosted", scope: "personal", monthly_price_cents: 0, push_limit: -1, max_hub_members: null, active: true, features: { self_hosted: true } });
      expect(hub).toMatchObject({ id: "self_hosted_team", scope: "hub", memory_limit: 500 });
      // The same limits GET /v1/usage reports, from one place.
      const limits = (await ann.get("/v1/usage")).body.data.limits;
      for (const field of ["memory_limit", "storage_bytes_limit", "max_attachment_bytes", "rate_limit_rpm", "rate_limit_heavy_rpm", "ask_model"]) expect(personal[field]).toEqual(limits[field]);
      const { Memax } = await loadMemaxSdk();
      const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: routeFetch });
      expect((await sdk.settings.plans()).map((p: { id: string }) => p.id)).toEqual(["self_hosted", "self_hosted_team"]);
    } finally {
      delete process.env.ENGRAM_QUOTA_HUB_MEMORIES;
    }
  });
});

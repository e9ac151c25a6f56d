import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, loadSdk, memax, pushProcessed, scratchHome, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * Memax's CLI `ask` (streaming, --no-stream, --format json) and `dreams quota`, and its SDK's
 * ask, askStream, settings, usage, notifications and event stream, unchanged, against the
 * built server. Memories are embedded by the server's own background runner; answers are
 * the embedded default (extractive, no chat model).
 */
describe("Memax CLI and SDK: ask, account, notifications, events", () => {
  let engram: Engram;
  let ann: EngramUser;
  let bob: EngramUser;
  let sdk: (user: EngramUser) => any;
  let MemaxError: new (...args: any[]) => Error;
  const home = scratchHome();
  const question = "When is the orion database backed up?";
  const cli = async (...args: string[]) => {
    const result = await memax(engram, args, { key: ann.key, home });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    return result.stdout;
  };

  beforeAll(async () => {
    engram = await startEngram();
    [ann, bob] = [await engram.user("Ann"), await engram.user("Bob")];
    const loaded = await loadSdk();
    MemaxError = loaded.MemaxError;
    sdk = (user) => new loaded.Memax({ apiUrl: engram.url, apiKey: user.key });
    const contents = [
      "# Backups\n\nThe orion database is backed up every night at 02:00 UTC to the cold storage bucket. A restore takes about twenty minutes.",
      "# Deploys\n\nThe web tier is deployed with blue-green switches on Tuesdays after the standup.",
      "# On-call\n\nThe on-call engineer rotates every Monday at 09:00 and carries the pager for a week.",
    ];
    await pushProcessed(ann, contents);
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("memax ask streams the answer, cited", async () => {
    const out = await cli("ask", question);
    expect(out).toMatch(/02:00 UTC/);
    expect(out).toMatch(/\[1\]/);
  });

  it("memax ask --no-stream and --format json give the same answer as the API", async () => {
    const rest = (await ann.api("POST", "/v1/ask", { query: question })).body.data;
    expect(rest.metadata.model).toBe("extractive");
    expect((await cli("ask", "--no-stream", question)).trim()).toBe(rest.answer);
    const json = JSON.parse(await cli("ask", "--format", "json", question));
    expect(json).toMatchObject({ answer: rest.answer, citations: rest.citations, metadata: { model: "extractive" } });
    expect(json.sources[0].title).toBe("Backups");
    expect(json.citations[0]).toMatchObject({ index: 1, memory_id: json.sources[0].id, title: "Backups" });
  });

  it("memax ask says when nothing answers the question", async () => {
    expect(await cli("ask", "--no-stream", "zyzzyva quokka xylophone")).toMatch(/could not find anything/);
  });

  it("SDK ask and askStream: sources, deltas, done", async () => {
    const client = sdk(ann);
    const result = await client.ask(question);
    expect(result.answer).toMatch(/02:00 UTC/);
    const events: [string, any][] = [];
    await new Promise<void>((resolve, reject) => {
      client.memories.askStream(question, { limit: 5 }, (event: string, data: unknown) => {
        events.push([event, data]);
        if (event === "done") resolve();
        if (event === "error") reject(new Error(JSON.stringify(data)));
      });
    });
    expect(events[0]![0]).toBe("sources");
    expect(events[0]![1][0].title).toBe("Backups");
    const text = events.filter(([e]) => e === "delta").map(([, d]) => d.text).join("");
    expect(text).toBe(result.answer);
    expect(events.at(-1)![1]).toMatchObject({ model: "extractive", tokens: expect.any(Number) });
  });

  it("memax dreams quota: unlimited, this month's runs", async () => {
    expect(await cli("dreams", "quota")).toMatch(/Dream quota — your personal quota\n\s+tier:\s+Lucid\n\s+used:\s+0 \(unlimited\)/);
    await ann.api("POST", "/v1/dreams/trigger");
    const json = JSON.parse(await cli("dreams", "quota", "--format", "json"));
    expect(json).toMatchObject({ scope: "personal", tier: "lucid", limit: -1, used: 1, allowed: true });
  });

  it("SDK settings: get, update; bad values refused, the dream tuning kept", async () => {
    const client = sdk(ann);
    expect(await client.settings.get()).toMatchObject({ theme: "system", notifications_enabled: true });
    expect(await client.settings.update({ theme: "dark", locale: "pt-BR" })).toMatchObject({ theme: "dark", locale: "pt-BR" });
    expect((await client.settings.get()).theme).toBe("dark");
    const refused = await client.settings.update({ theme: "neon" }).catch((e: Error) => e);
    expect(refused).toBeInstanceOf(MemaxError);
    expect((refused as any).status).toBe(400);
    // The SDK's dream tuning is kept, in range; three days would archive what was not yet read.
    const tooShort = await client.settings.update({ dreams_staleness_days: 3 }).catch((e: Error) => e);
    expect([(tooShort as any).status, (tooShort as Error).message]).toEqual([400, expect.stringContaining("dreams_staleness_days")]);
    expect(await client.settings.update({ dreams_staleness_days: 30, dreams_excluded_kinds: ["rationale"], notifications_enabled: false })).toMatchObject({ theme: "dark", notifications_enabled: false, dreams_staleness_days: 30 });
    expect(await client.settings.get()).toMatchObject({ dreams_enabled: true, dreams_merge_enabled: true, dreams_archive_enabled: true, dreams_staleness_days: 30, dreams_excluded_kinds: ["rationale"], dreams_similarity_threshold: 0.9 });
  });

  it("SDK usage counts the asks, pushes and limits", async () => {
    const usage = await sdk(ann).settings.usage();
    expect(usage).toMatchObject({ user_id: ann.id, push_count: 3, memory_count: 3, limits: { plan_id: "self_hosted", ask_limit: -1 } });
    expect(usage.ask_count).toBeGreaterThanOrEqual(6);
  });

  it("SDK plans and account.deleteAllData: the install's plans; a fresh user's account emptied, kept", async () => {
    expect((await sdk(bob).settings.plans()).map((p: any) => [p.id, p.scope])).toEqual([["self_hosted", "personal"], ["self_hosted_team", "hub"]]);
    const cyd = await engram.user("Cyd");
    await sdk(cyd).push("# Cyd's scratch note\n\nTo be wiped.");
    expect(await sdk(cyd).account.deleteAllData()).toMatchObject({ deleted: true, memories: 1 });
    expect((await sdk(cyd).memories.list()).memories).toEqual([]);
    expect((await sdk(cyd).auth.me()).user.id).toBe(cyd.id);
  });

  it("SDK notifications and the event stream: an invite arrives live, is seen and accepted", async () => {
    const annClient = sdk(ann);
    const received: [string, any][] = [];
    const subscription = annClient.events.subscribe({ onEvent: (event: string, data: unknown) => received.push([event, data]) });
    try {
      await eventually(async () => received.some(([e]) => e === "ready"), 20_000, "event stream ready");
      const hub = (await bob.api("POST", "/v1/hubs", { name: "Bob's team" })).body.data;
      const hubId = hub.hub?.id ?? hub.id;
      expect((await bob.api("POST", `/v1/hubs/${hubId}/invites`, { role: "contributor", email: ann.email })).status).toBe(201);
      await eventually(async () => received.some(([e]) => e === "notification.created"), 20_000, "notification.created event");

      const list = await annClient.notifications.list({ kind: ["hub_invite"] });
      expect(list.notifications).toHaveLength(1);
      const [invite] = list.notifications;
      expect(invite).toMatchObject({ kind: "hub_invite", status: "pending", hub_id: hubId, payload: { hub: { id: hubId }, role: "contributor" } });
      const summary = await annClient.notifications.summary();
      expect(summary).toMatchObject({ needs_action_pending: 1, by_kind: { hub_invite: { pending: 1, unseen: 1 } } });
      expect(await annClient.notifications.markSeen(invite.id)).toEqual({ status: "seen" });
      expect((await annClient.notifications.summary()).by_kind.hub_invite).toEqual({ pending: 1, unseen: 0 });
      expect(await annClient.notifications.resolve(invite.id, "accept")).toMatchObject({ status: "resolved", resolution: "accepted" });
      expect((await ann.api("GET", "/v1/hubs")).body.data.map((h: any) => h.hub.id)).toContain(hubId);

      // Bob hears that Ann joined; a receipt is bulk-seen and bulk-dismissed.
      const bobClient = sdk(bob);
      expect((await bobClient.notifications.list({ kind: ["hub_member_joined"] })).notifications).toHaveLength(1);
      expect(await bobClient.notifications.bulkSeen({ kinds: ["hub_member_joined"] })).toEqual({ affected: 1 });
      expect(await bobClient.notifications.bulkDismiss({ kinds: ["hub_member_joined"] })).toEqual({ affected: 1 });
      const decision = await bobClient.notifications.bulkSeen({ kinds: ["hub_invite"] }).catch((e: Error) => e);
      expect((decision as any).status).toBe(400);

      // Now a member, Ann's stream carries Bob's pushes to the shared hub.
      const pushed = (await bob.api("POST", "/v1/memories", { content: "The shared hub's first note." }, { "x-hub-id": hubId })).body.data;
      await eventually(async () => received.some(([e, d]) => e === "memory.created" && JSON.stringify(d).includes(pushed.id)), 20_000, "memory.created event");
    } finally {
      subscription.abort();
    }
  });
});

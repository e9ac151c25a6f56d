import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { chatTurnsIdle, startChatTurns, stopChatTurns, sweepChatTurns } from "@/lib/chat/chat-turn-runner.ts";
import { runChatTurn } from "@/lib/chat/run-chat-turn.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { clientFor, createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { startFakeChat, type FakeChat } from "./support/openai-stream-fake.ts";
import { openSse } from "./support/sse-client.ts";
import { MAX_CHAT_STREAMS_PER_USER } from "@/lib/chat/stream-chat-message.ts";
import { CHAT_LIMITS } from "@/lib/chat/chat-fields.ts";
import { deleteChatSession } from "@/lib/chat/delete-chat-session.ts";
import { updateChatSession } from "@/lib/chat/update-chat-session.ts";
import { newId } from "@/lib/ids.ts";
import { deleteAccountData } from "@/lib/users/delete-account-data.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";

// Agent chat (Memax's chats resource): sessions over the caller's hubs, turns answered in the
// background from recall, a stream per answer, cancel, regenerate and approvals for saving.

let h: Harness;
let ann: Client;
let bob: Client;
let teamHubId: string;

const base = "/v1/chat/sessions";

async function session(who: Client, body: Record<string, unknown> = { scope_type: "user_all_hubs" }) {
  const res = await who.post(base, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; status: string; tools: string[] };
}

async function send(who: Client, sessionId: string, content: string, key?: string) {
  const res = await who.post(`${base}/${sessionId}/messages`, { content, ...(key && { idempotency_key: key }) });
  return res;
}

async function answered(who: Client, sessionId: string, messageId: string) {
  await chatTurnsIdle();
  const res = await who.get(`${base}/${sessionId}/messages/${messageId}`);
  expect(res.status).toBe(200);
  return res.body.data;
}

beforeAll(async () => {
  h = await createHarness();
  await startBackgroundProcessing();
  ann = await h.user("Ann");
  bob = await h.user("Bob");
  teamHubId = await h.teamHub(ann, [[bob, "contributor"]]);
  const memories = [
    [ann, undefined, "# Deploy freeze\nThe deploy freeze starts on Friday at 18:00 and lasts until Monday morning. Hotfixes need two approvals."],
    [ann, undefined, "# Espresso\nThe office espresso machine is descaled every second Tuesday."],
    [bob, teamHubId, "# Incident rotation\nThe on-call rotation hands over on Wednesdays at noon; the pager goes to the secondary after 15 minutes."],
  ] as const;
  for (const [who, hub, content] of memories) {
    const res = await who.post("/v1/memories", { content }, hub ? { headers: { "x-hub-id": hub } } : undefined);
    expect(res.status).toBe(201);
    await waitProcessed(h.db, who, res.body.data.id);
  }
});
afterAll(async () => {
  stopBackgroundProcessing();
  await chatTurnsIdle();
  await h?.close();
});

describe("GET /v1/chat/tools", () => {
  it("lists the catalogue: recall and push_memory run here, web search does not", async () => {
    const res = await ann.get("/v1/chat/tools");
    expect(res.status).toBe(200);
    const byName = Object.fromEntries((res.body.data as { name: string }[]).map((t) => [t.name, t]));
    expect(byName.recall).toMatchObject({ available: true, default_in_chat: true, approval_required: false });
    expect(byName.push_memory).toMatchObject({ available: true, approval_required: true });
    expect(byName.web_search).toMatchObject({ available: false, default_in_chat: false });
  });
});

describe("sessions", () => {
  it("creates, reads, lists, updates and deletes a session", async () => {
    const created = await session(ann, { scope_type: "single_hub", scope_hub_ids: [teamHubId], title: "Ops" });
    expect(created).toMatchObject({ status: "idle", tools: ["recall", "push_memory"] });
    const got = await ann.get(`${base}/${created.id}`);
    expect(got.body.data).toMatchObject({ id: created.id, owner_id: ann.id, scope_type: "single_hub", scope_hub_ids: [teamHubId], title: "Ops", model: "local", toolset_version: 1, message_count: 0 });
    const patched = await ann.patch(`${base}/${created.id}`, { title: "Ops chat", pinned: true, tools: ["recall"], write_hub_id: teamHubId });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data).toMatchObject({ title: "Ops chat", tools: ["recall"], write_hub_id: teamHubId, pinned_at: expect.any(String) });
    expect((await ann.get(`${base}?pinned=true`)).body.data.sessions.map((s: { id: string }) => s.id)).toEqual([created.id]);
    await ann.patch(`${base}/${created.id}`, { archived: true });
    expect((await ann.get(base)).body.data.sessions.map((s: { id: string }) => s.id)).not.toContain(created.id);
    expect((await ann.get(`${base}?archived=true`)).body.data.sessions.map((s: { id: string }) => s.id)).toEqual([created.id]);
    expect((await bob.get(`${base}/${created.id}`)).status).toBe(404);
    expect((await bob.delete(`${base}/${created.id}`)).status).toBe(404);
    const deleted = await ann.delete(`${base}/${created.id}`);
    expect(deleted.body.data).toEqual({ id: created.id, deleted: true });
    expect((await ann.get(`${base}/${created.id}`)).status).toBe(404);
    expect(await h.db.chatSession.count({ where: { id: created.id } })).toBe(1);
  });

  it("takes hub and memory ids in any case and stores them as the database names them", async () => {
    const pinned = await h.db.memory.findFirstOrThrow({ where: { hubId: teamHubId }, select: { id: true } });
    const body = { scope_type: "hub_subset", scope_hub_ids: [teamHubId.toUpperCase()], write_hub_id: teamHubId.toUpperCase(), pinned_memory_ids: [pinned.id.toUpperCase()] };
    const res = await ann.post(base, body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ scope_hub_ids: [teamHubId], write_hub_id: teamHubId, pinned_memory_ids: [pinned.id] });
  });

  it("stores a hub named twice (in any case) once", async () => {
    const pinned = await h.db.memory.findFirstOrThrow({ where: { hubId: teamHubId }, select: { id: true } });
    const body = { scope_type: "hub_subset", scope_hub_ids: [teamHubId, teamHubId.toUpperCase()], pinned_memory_ids: [pinned.id, pinned.id.toUpperCase()] };
    const res = await ann.post(base, body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ scope_hub_ids: [teamHubId], pinned_memory_ids: [pinned.id] });
    expect((await h.db.chatSession.findUniqueOrThrow({ where: { id: res.body.data.id } })).scopeHubIds).toEqual([teamHubId]);
    // Exactly one hub twice is still one hub.
    const single = await ann.post(base, { scope_type: "single_hub", scope_hub_ids: [teamHubId, teamHubId.toUpperCase()] });
    expect(single.status, JSON.stringify(single.body)).toBe(201);
    expect(single.body.data.scope_hub_ids).toEqual([teamHubId]);
  });

  it("pages the list by activity", async () => {
    const carl = await h.user("Carl");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await session(carl)).id);
    const first = await carl.get(`${base}?limit=2`);
    expect(first.body.data.has_more).toBe(true);
    const second = await carl.get(`${base}?limit=2&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    const third = await carl.get(`${base}?limit=2&cursor=${encodeURIComponent(second.body.data.next_cursor)}`);
    const seen = [first, second, third].flatMap((r) => r.body.data.sessions.map((s: { id: string }) => s.id));
    expect(seen).toEqual([...ids].reverse());
    expect(third.body.data).toMatchObject({ has_more: false, next_cursor: "" });
    expect((await ann.get(`${base}?cursor=${encodeURIComponent(first.body.data.next_cursor)}`)).body.error.code).toBe("invalid_cursor");
  });

  it("refuses what it cannot honour, with the field named", async () => {
    const cases: [Record<string, unknown>, number, string][] = [
      [{ scope_type: "everything" }, 400, "invalid_request"],
      [{ scope_type: "single_hub" }, 400, "invalid_request"],
      [{ scope_type: "user_all_hubs", scope_hub_ids: [teamHubId] }, 400, "invalid_request"],
      [{ scope_type: "hub_subset", scope_hub_ids: [bob.personalHubId] }, 404, "not_found"],
      [{ scope_type: "user_all_hubs", tools: ["web_search"] }, 400, "invalid_request"],
      [{ scope_type: "user_all_hubs", tools: ["shell"] }, 400, "invalid_request"],
      [{ scope_type: "user_all_hubs", model: "gpt-9" }, 400, "invalid_request"],
      [{ scope_type: "single_hub", scope_hub_ids: [ann.personalHubId], write_hub_id: teamHubId }, 400, "invalid_request"],
      [{ scope_type: "user_all_hubs", persona_id: "00000000-0000-7000-8000-000000000000" }, 404, "not_found"],
      [{ scope_type: "user_all_hubs", pinned_memory_ids: ["00000000-0000-7000-8000-000000000000"] }, 404, "not_found"],
    ];
    for (const [body, status, code] of cases) {
      const res = await ann.post(base, body);
      expect([res.status, res.body.error?.code], JSON.stringify(body)).toEqual([status, code]);
    }
    const s = await session(ann);
    const scope = await ann.patch(`${base}/${s.id}`, { scope_type: "single_hub" });
    expect(scope.status).toBe(400);
    expect(scope.body.error.details.issues[0].path).toBe("scope_type");
    const viewerHub = await h.teamHub(bob, [[ann, "viewer"]]);
    const viewer = await ann.post(base, { scope_type: "single_hub", scope_hub_ids: [viewerHub], write_hub_id: viewerHub });
    expect([viewer.status, viewer.body.error.code]).toEqual([403, "forbidden"]);
  });

  it("keeps a persona named in upper case as the persona's own id, on create and on PATCH", async () => {
    const dora = await h.user("Dora");
    const persona = await dora.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "SOUL.md", content: "# Pirate\nSpeak like a pirate." });
    expect(persona.status).toBe(201);
    const id: string = persona.body.data.id;
    // UUIDs are case-insensitive: the upper-case form names the same persona, and what is stored and
    // answered is its id as GET /v1/personas lists it (and GET /v1/settings answers its default), which
    // clients compare to.
    const created = await dora.post(base, { scope_type: "user_all_hubs", persona_id: id.toUpperCase() });
    expect([created.status, created.body.data?.persona_id]).toEqual([201, id]);
    expect((await h.db.chatSession.findUniqueOrThrow({ where: { id: created.body.data.id } })).personaId).toBe(id);
    const plain = await session(dora, { scope_type: "user_all_hubs", persona_id: "none" });
    const patched = await dora.patch(`${base}/${plain.id}`, { persona_id: id.toUpperCase() });
    expect([patched.status, patched.body.data?.persona_id]).toEqual([200, id]);
    expect((await dora.get(`${base}/${plain.id}`)).body.data.persona_id).toBe(id);
  });

  it(`keeps at most ${CHAT_LIMITS.sessionsPerUser} live sessions per user, even when created together; deleted ones do not count`, async () => {
    const dee = await h.user("Dee");
    const now = new Date();
    const row = (i: number, deletedAt: Date | null = null) => ({
      id: newId(now.getTime() - 10_000 + i),
      ownerId: dee.id,
      scopeType: "user_all_hubs",
      model: "local",
      activityAt: now,
      deletedAt,
    });
    await h.db.chatSession.createMany({ data: Array.from({ length: CHAT_LIMITS.sessionsPerUser - 2 }, (_, i) => row(i)) });
    await h.db.chatSession.createMany({ data: Array.from({ length: 3 }, (_, i) => row(5_000 + i, now)) });
    const results = await Promise.all(Array.from({ length: 5 }, () => dee.post(base, { scope_type: "user_all_hubs" })));
    expect(results.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409]);
    const refused = results.find((r) => r.status === 409)!;
    expect(refused.body.error).toMatchObject({ code: "conflict", details: { limit: CHAT_LIMITS.sessionsPerUser } });
    expect(await h.db.chatSession.count({ where: { ownerId: dee.id, deletedAt: null } })).toBe(CHAT_LIMITS.sessionsPerUser);
    // Deleting one makes room for one.
    expect((await dee.delete(`${base}/${results.find((r) => r.status === 201)!.body.data.id}`)).status).toBe(200);
    expect((await dee.post(base, { scope_type: "user_all_hubs" })).status).toBe(201);
    expect((await dee.post(base, { scope_type: "user_all_hubs" })).status).toBe(409);
  });

  it("an update that passed its check as the session was deleted answers 404 and writes nothing", async () => {
    const eli = await h.user("Eli");
    const removals: [Client, string, (sessionId: string) => Promise<unknown>][] = [
      [ann, "a delete", (sessionId) => deleteChatSession(sessionContext(h, ann), sessionId)],
      [eli, "an account-data deletion", () => deleteAccountData(sessionContext(h, eli))],
    ];
    for (const [owner, what, remove] of removals) {
      const s = await session(owner);
      // The removal commits between the update's existence check and its write.
      const racing = sessionContext(h, owner, changedBefore(h.db, ["$transaction", "chatSession.update"], () => remove(s.id)));
      await expect(updateChatSession(racing, s.id, { title: "Renamed too late" }), what).rejects.toMatchObject({ code: "not_found" });
      expect((await h.db.chatSession.findUnique({ where: { id: s.id } }))?.title ?? "", what).not.toBe("Renamed too late");
      expect((await owner.get(`${base}/${s.id}`)).status, what).toBe(404);
    }
  });

  it("keeps a key limited to hubs within them", async () => {
    const key = await ann.post("/v1/auth/api-keys", { name: "team only", hub_ids: [teamHubId] });
    const teamKey = clientFor(key.body.data.key);
    const all = await session(ann);
    expect((await teamKey.post(base, { scope_type: "user_all_hubs" })).status).toBe(403);
    expect((await teamKey.get(`${base}/${all.id}`)).status).toBe(404);
    const mine = await teamKey.post(base, { scope_type: "single_hub", scope_hub_ids: [teamHubId] });
    expect(mine.status).toBe(201);
    const listed = (await teamKey.get(`${base}?limit=100`)).body.data.sessions.map((s: { id: string }) => s.id);
    expect(listed).toContain(mine.body.data.id);
    expect(listed).not.toContain(all.id);
  });
});

describe("a turn", () => {
  it("answers from recall, with citations, streamed and replayable from any event", async () => {
    const s = await session(ann);
    const sent = await send(ann, s.id, "When does the deploy freeze start?", "k-1");
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    const { outcome, assistant_message, resume_url, user_message_id } = sent.body.data;
    expect(outcome).toBe("fresh");
    expect(resume_url).toBe(`${base}/${s.id}/messages/${assistant_message.id}/stream`);
    const answer = await answered(ann, s.id, assistant_message.id);
    expect(answer).toMatchObject({ role: "assistant", status: "completed", parent_message_id: user_message_id, sequence: 2 });
    expect(answer.content).toMatch(/Friday at 18:00/);
    expect(answer.citations[0]).toMatchObject({ index: 1, title: "Deploy freeze" });
    expect(answer.scope_hub_ids_used).toEqual(expect.arrayContaining([ann.personalHubId, teamHubId]));
    expect(answer.tool_calls[0]).toMatchObject({ name: "recall", status: "done" });
    // It names what it found; the passages it read stay on the server.
    expect(answer.tool_calls[0].result.memories.length).toBeGreaterThan(0);
    expect(answer.tool_calls[0].result).not.toHaveProperty("sources");

    const stream = await openSse(ann.key, resume_url);
    const done = await stream.waitFor((e) => e.event === "message.completed");
    const names = stream.events.map((e) => e.event);
    expect(names).toEqual(["message.tool_call", "message.tool_result", ...names.filter((n) => n === "message.text"), "message.completed"]);
    expect(stream.events.map((e) => Number(e.id))).toEqual(stream.events.map((_, i) => i + 1));
    expect(done.data.message).toMatchObject({ id: assistant_message.id, status: "completed" });
    const text = stream.events.filter((e) => e.event === "message.text").map((e) => e.data.text).join("");
    expect(text).toBe(answer.content);
    expect((await ann.get(resume_url, { headers: { "last-event-id": "x1" } })).status).toBe(400);
    // Resumed past the end of a finished turn: an empty stream that ends.
    const past = await ann.get(resume_url, { headers: { "last-event-id": "99999999999999999999" } });
    expect(past.status).toBe(200);
    expect(past.text).not.toContain("event:");
    const resumed = await openSse(ann.key, resume_url, { "last-event-id": "2" });
    await resumed.waitFor((e) => e.event === "message.completed");
    expect(resumed.events.map((e) => e.id)).toEqual(stream.events.slice(2).map((e) => e.id));

    const session1 = (await ann.get(`${base}/${s.id}`)).body.data;
    expect(session1).toMatchObject({ status: "idle", message_count: 2, title: "When does the deploy freeze start?" });
    expect(session1.active_message_id).toBeUndefined();
  });

  it("replays a repeated idempotency key instead of answering twice", async () => {
    const s = await session(ann);
    const first = await send(ann, s.id, "How often is the espresso machine descaled?", "same-key");
    await chatTurnsIdle();
    const again = await send(ann, s.id, "How often is the espresso machine descaled?", "same-key");
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ outcome: "replay", user_message_id: first.body.data.user_message_id, active_message_id: first.body.data.active_message_id });
    expect(again.body.data.assistant_message.content).toMatch(/second Tuesday/);
    const reused = await send(ann, s.id, "Something else", "same-key");
    expect([reused.status, reused.body.error.code]).toEqual([409, "conflict"]);
    expect((await ann.get(`${base}/${s.id}/messages`)).body.data.messages).toHaveLength(2);
  });

  it("reads only the session's hubs, and drops a hub the owner lost", async () => {
    // Ann can read the deploy freeze (her personal hub), but this chat reads only the team hub.
    const team = await session(ann, { scope_type: "single_hub", scope_hub_ids: [teamHubId] });
    const noFreeze = await answered(ann, team.id, (await send(ann, team.id, "When does the deploy freeze start?")).body.data.active_message_id);
    expect(noFreeze.scope_hub_ids_used).toEqual([teamHubId]);
    expect(noFreeze.content).not.toMatch(/Friday/);
    const s = await session(bob, { scope_type: "single_hub", scope_hub_ids: [teamHubId] });
    const rota = await answered(bob, s.id, (await send(bob, s.id, "When does the on-call rotation hand over?")).body.data.active_message_id);
    expect(rota.content).toMatch(/Wednesdays at noon/);
    await h.db.hubMember.delete({ where: { hubId_userId: { hubId: teamHubId, userId: bob.id } } });
    try {
      const after = await answered(bob, s.id, (await send(bob, s.id, "When does the on-call rotation hand over?")).body.data.active_message_id);
      expect(after.scope_hub_ids_used).toEqual([]);
      expect(after.content).not.toMatch(/Wednesdays/);
    } finally {
      await h.db.hubMember.create({ data: { hubId: teamHubId, userId: bob.id, role: "contributor" } });
    }
  });

  it("answers a short follow-up with the previous question's subject", async () => {
    const s = await session(ann);
    await answered(ann, s.id, (await send(ann, s.id, "Tell me about the deploy freeze rules")).body.data.active_message_id);
    const follow = await answered(ann, s.id, (await send(ann, s.id, "and hotfixes?")).body.data.active_message_id);
    expect(follow.content).toMatch(/two approvals/);
  });

  it("regenerates a finished answer and hides the one it replaced", async () => {
    const s = await session(ann);
    const first = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
    await chatTurnsIdle();
    const res = await ann.post(`${base}/${s.id}/messages/${first.active_message_id}/regenerate`);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body.data).toMatchObject({ outcome: "fresh", prior_assistant_id: first.active_message_id, prior_assistant_status: "completed" });
    const again = await answered(ann, s.id, res.body.data.active_message_id);
    expect(again).toMatchObject({ parent_message_id: first.active_message_id, status: "completed", sequence: 3 });
    expect(again.content).toMatch(/Friday/);
    const listed = (await ann.get(`${base}/${s.id}/messages`)).body.data.messages.map((m: { id: string }) => m.id);
    expect(listed).toEqual([first.user_message_id, again.id]);
    const twice = await ann.post(`${base}/${s.id}/messages/${first.active_message_id}/regenerate`);
    expect([twice.status, twice.body.error.code]).toEqual([409, "regenerate_not_eligible"]);
    const user = await ann.post(`${base}/${s.id}/messages/${first.user_message_id}/regenerate`);
    expect(user.status).toBe(400);
    // Only the last answer: once another question was answered, this one's answer stays as it is.
    await answered(ann, s.id, (await send(ann, s.id, "How often is the espresso machine descaled?")).body.data.active_message_id);
    const older = await ann.post(`${base}/${s.id}/messages/${again.id}/regenerate`);
    expect([older.status, older.body.error.code]).toEqual([409, "regenerate_not_eligible"]);
  });
});

describe("saving needs approval", () => {
  it("pauses for approval, locks the session meanwhile, and saves once approved", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "Remember that the staging database is reset every Sunday night.")).body.data;
    await chatTurnsIdle();
    expect((await ann.get(`${base}/${s.id}`)).body.data).toMatchObject({ status: "awaiting_approval", active_message_id: sent.active_message_id });
    const stream = await openSse(ann.key, sent.resume_url);
    const required = await stream.waitFor((e) => e.event === "approval.required");
    expect(required.data).toMatchObject({ tool_name: "push_memory", arguments: { content: "the staging database is reset every Sunday night.", hub_id: ann.personalHubId } });
    const busy = await send(ann, s.id, "Another question");
    expect([busy.status, busy.body.error.code]).toEqual([409, "chat_session_locked"]);
    expect(busy.body.error.details.active_message_id).toBe(sent.active_message_id);
    expect((await bob.post(`${base}/${s.id}/approvals/${required.data.approval_id}`, { decision: "approve" })).status).toBe(404);
    // Turning the tool off while the save waits does not drop the save the person is approving.
    expect((await ann.patch(`${base}/${s.id}`, { tools: ["recall"] })).status).toBe(200);
    const approved = await ann.post(`${base}/${s.id}/approvals/${required.data.approval_id}`, { decision: "approve" });
    expect(approved.body.data).toEqual({ approval_id: required.data.approval_id, status: "approved" });
    const done = await stream.waitFor((e) => e.event === "message.completed", 10_000);
    expect(stream.events.map((e) => e.event)).toEqual(["message.tool_call", "approval.required", "approval.decided", "message.tool_result", "message.text", "message.completed"]);
    expect(done.data.message.content).toMatch(/^Saved to “Personal”: “/);
    const saved = await h.db.memory.findMany({ where: { hubId: ann.personalHubId, content: "the staging database is reset every Sunday night." } });
    expect(saved).toHaveLength(1);
    expect(saved[0]).toMatchObject({ source: "chat", ownerId: ann.id });
    await waitProcessed(h.db, ann, saved[0]!.id);
    const twice = await ann.post(`${base}/${s.id}/approvals/${required.data.approval_id}`, { decision: "deny" });
    expect([twice.status, twice.body.error.code]).toEqual([409, "chat_approval_already_decided"]);
    // Regenerated (with the tool back on), the save asks again, and approving it again saves nothing new (the hub already has it).
    await ann.patch(`${base}/${s.id}`, { tools: ["recall", "push_memory"] });
    const regen = await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/regenerate`);
    expect(regen.status).toBe(202);
    await chatTurnsIdle();
    const second = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: regen.body.data.active_message_id } });
    expect((await ann.post(`${base}/${s.id}/approvals/${second.id}`, { decision: "approve" })).status).toBe(200);
    expect((await answered(ann, s.id, regen.body.data.active_message_id)).content).toBe(done.data.message.content);
    expect(await h.db.memory.count({ where: { hubId: ann.personalHubId, content: "the staging database is reset every Sunday night." } })).toBe(1);
  });

  it("saves nothing when denied, and times out an approval nobody gave", async () => {
    const s = await session(ann);
    const denied = (await send(ann, s.id, "Remember: the wifi password rotates monthly.")).body.data;
    await chatTurnsIdle();
    const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: denied.active_message_id } });
    expect((await ann.post(`${base}/${s.id}/approvals/${approval.id}`, { decision: "deny" })).body.data.status).toBe("denied");
    expect((await answered(ann, s.id, denied.active_message_id)).content).toBe("I did not save it: you declined.");
    expect(await h.db.memory.count({ where: { content: { contains: "wifi password" } } })).toBe(0);

    const late = (await send(ann, s.id, "Remember that the printer is on floor 3.")).body.data;
    await chatTurnsIdle();
    const waiting = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: late.active_message_id } });
    await h.db.chatApproval.update({ where: { id: waiting.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const res = await ann.post(`${base}/${s.id}/approvals/${waiting.id}`, { decision: "approve" });
    expect([res.status, res.body.error.code]).toEqual([408, "chat_approval_timeout"]);
    const answer = await answered(ann, s.id, late.active_message_id);
    expect(answer).toMatchObject({ status: "completed", content: "I did not save it: the approval was not given in time." });
    expect(await h.db.memory.count({ where: { content: { contains: "printer" } } })).toBe(0);

    // Timed out by the sweep, with nobody deciding: the same sweep hands the turn on.
    const unseen = (await send(ann, s.id, "Remember that the scanner is on floor 4.")).body.data;
    await chatTurnsIdle();
    const pending = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: unseen.active_message_id } });
    await h.db.chatApproval.update({ where: { id: pending.id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await sweepChatTurns(h.database)).toContain(unseen.active_message_id);
  });

  it("cancels a turn waiting on its approval; a canceled answer cannot be regenerated", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "Remember that the VPN moves to port 8443.")).body.data;
    await chatTurnsIdle();
    const cancel = await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/cancel`);
    expect(cancel.body.data).toEqual({ assistant_message_id: sent.active_message_id, session_id: s.id, status: "canceling", cancel_registered: true });
    const answer = await answered(ann, s.id, sent.active_message_id);
    expect(answer.status).toBe("canceled");
    expect((await ann.get(`${base}/${s.id}`)).body.data.status).toBe("idle");
    const again = await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/cancel`);
    expect(again.body.data).toMatchObject({ status: "canceled", cancel_registered: false });
    const regen = await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/regenerate`);
    expect([regen.status, regen.body.error.code]).toEqual([409, "regenerate_not_eligible"]);
    expect((await ann.post(`${base}/${s.id}/messages/${sent.user_message_id}/cancel`)).status).toBe(400);
    const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: sent.active_message_id } });
    expect(approval.status).toBe("denied");
    // Its stream says so before the turn's end, as a decision would.
    const events = (await h.db.chatEvent.findMany({ where: { messageId: sent.active_message_id }, orderBy: { seq: "asc" } })).map((e) => [e.type, e.data]);
    expect(events.slice(-2)).toEqual([["approval.decided", expect.objectContaining({ approval_id: approval.id, status: "denied" })], ["message.canceled", expect.anything()]]);
  });

  it("a deleted chat is gone for its owner at once, and purged with its messages an hour later", async () => {
    const s = await session(ann);
    await send(ann, s.id, "When does the deploy freeze start?");
    await chatTurnsIdle();
    expect((await ann.delete(`${base}/${s.id}`)).body.data).toEqual({ id: s.id, deleted: true });
    expect((await ann.get(`${base}/${s.id}`)).status).toBe(404);
    await sweepChatTurns(h.database);
    expect(await h.db.chatMessage.count({ where: { sessionId: s.id } })).toBe(2);
    await sweepChatTurns(h.database, new Date(Date.now() + 61 * 60_000));
    expect(await h.db.chatSession.count({ where: { id: s.id } })).toBe(0);
    expect(await h.db.chatMessage.count({ where: { sessionId: s.id } })).toBe(0);
  });

  it("a read-only key can read a chat but not send to it", async () => {
    const s = await session(ann);
    const key = await ann.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] });
    const reader = clientFor(key.body.data.key);
    expect((await reader.get(`${base}/${s.id}`)).status).toBe(200);
    expect((await reader.post(`${base}/${s.id}/messages`, { content: "hi" })).status).toBe(403);
  });
});

describe("workers", () => {
  it("drops stream events past their replay time in bounded batches: one sweep deletes at most its batches, the next goes on", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
    await chatTurnsIdle();
    const fresh = await h.db.chatEvent.count({ where: { messageId: sent.active_message_id } });
    const old = new Date(Date.now() - 25 * 3_600_000);
    await h.db.$executeRaw`INSERT INTO chat_events (message_id, seq, type, data, created_at)
      SELECT ${sent.active_message_id}::uuid, 100000 + n, 'message.delta', '{}'::jsonb, ${old} FROM generate_series(1, 2300) AS n`;
    const oldLeft = () => h.db.chatEvent.count({ where: { messageId: sent.active_message_id, createdAt: { lt: new Date(Date.now() - 24 * 3_600_000) } } });
    // One batch (2,000 rows) per sweep here: the 300 left over wait for the next sweep.
    await sweepChatTurns(h.database, new Date(), undefined, 1);
    expect(await oldLeft()).toBe(300);
    await sweepChatTurns(h.database, new Date(), undefined, 1);
    expect(await oldLeft()).toBe(0);
    expect(await h.db.chatEvent.count({ where: { messageId: sent.active_message_id } })).toBe(fresh);
  });

  it("a turn whose worker died mid-answer ends partial_failed; one that never started is run by the sweep", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
    await chatTurnsIdle();
    // Rewind it to a worker that wrote one piece of text and stopped.
    const longAgo = new Date(Date.now() - 5 * 60_000);
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { status: "running", leaseOwner: "dead-worker", heartbeatAt: new Date(), content: "The deploy" } });
    await h.db.chatEvent.deleteMany({ where: { messageId: sent.active_message_id, type: "message.completed" } });
    await h.db.chatSession.update({ where: { id: s.id }, data: { status: "running", activeMessageId: sent.active_message_id } });
    // While its worker still writes, nobody else takes the turn.
    expect(await runChatTurn(h.database, sent.active_message_id, "impatient")).toBe("skipped");
    expect(await sweepChatTurns(h.database)).not.toContain(sent.active_message_id);
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { heartbeatAt: longAgo } });
    expect(await sweepChatTurns(h.database)).toContain(sent.active_message_id);
    expect(await runChatTurn(h.database, sent.active_message_id, "rescuer")).toBe("finished");
    const answer = (await ann.get(`${base}/${s.id}/messages/${sent.active_message_id}`)).body.data;
    expect(answer).toMatchObject({ status: "partial_failed", content: "The deploy", error: { code: "interrupted" } });
    expect((await ann.get(`${base}/${s.id}`)).body.data.status).toBe("idle");
    expect((await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/regenerate`)).status).toBe(202);
    await chatTurnsIdle();

    const lost = await h.db.chatMessage.create({
      data: { id: "0190e9a0-0000-7000-8000-00000000c0de", sessionId: s.id, sequence: 100, role: "assistant", authorUserId: ann.id, status: "queued", parentMessageId: sent.user_message_id, credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null }, updatedAt: longAgo },
    });
    await h.db.chatSession.update({ where: { id: s.id }, data: { status: "running", activeMessageId: lost.id } });
    await h.db.$executeRaw`UPDATE chat_messages SET updated_at = ${longAgo} WHERE id = ${lost.id}::uuid`;
    expect(await sweepChatTurns(h.database)).toContain(lost.id);
    expect(await runChatTurn(h.database, lost.id)).toBe("finished");
    expect((await h.db.chatMessage.findUniqueOrThrow({ where: { id: lost.id } })).status).toBe("completed");
  });

  it("a finished turn keeps the names of the memories it recalled, not the passages it read from them", async () => {
    const s = await session(bob, { scope_type: "single_hub", scope_hub_ids: [teamHubId] });
    const sent = (await send(bob, s.id, "When does the on-call rotation hand over?")).body.data;
    const answer = await answered(bob, s.id, sent.active_message_id);
    expect(answer.content).toMatch(/Wednesdays at noon/);
    expect(answer.tool_calls[0].result.memories).toEqual([expect.objectContaining({ title: "Incident rotation" })]);
    // The passages were only for the turn: a memory (or hub) deleted later leaves no copy of its text here.
    const row = await h.db.chatMessage.findUniqueOrThrow({ where: { id: sent.active_message_id } });
    expect(row.toolCalls).toEqual([expect.objectContaining({ name: "recall", result: { memories: [expect.objectContaining({ title: "Incident rotation" })] } })]);
    expect(JSON.stringify(row.toolCalls)).not.toMatch(/pager goes to the secondary/);
  });

  it("a memory hard-deleted later leaves no title in the tool results and citations stored of earlier turns", async () => {
    const dee = await h.user("Dee");
    const hub = await h.teamHub(dee);
    const push = async (title: string) => (await dee.post("/v1/memories", { title, content: `${title}: the body.` }, { headers: { "x-hub-id": hub } })).body.data.id as string;
    const [doomed, kept, saved] = [await push("Secret merger plans"), await push("Lunch menu"), await push("Secret saved note")];
    const s = await session(dee, { scope_type: "single_hub", scope_hub_ids: [hub] });
    const user = await h.db.chatMessage.create({ data: { id: newId(), sessionId: s.id, sequence: 1, role: "user", authorUserId: dee.id, status: "completed", content: "What is planned?" } });
    const turn = await h.db.chatMessage.create({
      data: {
        id: newId(), sessionId: s.id, sequence: 2, role: "assistant", authorUserId: dee.id, status: "completed", parentMessageId: user.id, content: "See the notes.",
        toolCalls: [
          { id: "c1", name: "recall", arguments: { query: "plans" }, status: "done", result: { memories: [{ id: doomed, title: "Secret merger plans", hub_id: hub, relevance_score: 0.9 }, { id: kept, title: "Lunch menu", hub_id: hub, relevance_score: 0.5 }] } },
          { id: "c2", name: "push_memory", arguments: { content: "x" }, status: "done", result: { memory_id: saved, hub_id: hub, title: "Secret saved note" } },
        ],
        citations: [{ index: 1, memory_id: doomed, title: "Secret merger plans", hub_id: hub }, { index: 2, memory_id: kept, title: "Lunch menu", hub_id: hub }],
      },
    });
    // The stream's replay (kept a day) carries the same: the tool results, and the finished message whole.
    await h.db.chatEvent.createMany({
      data: [
        { messageId: turn.id, seq: 1, type: "message.tool_result", data: { tool_call_id: "c1", name: "recall", result: { memories: (turn.toolCalls as any)[0].result.memories } } },
        { messageId: turn.id, seq: 2, type: "message.completed", data: { message: { id: turn.id, tool_calls: turn.toolCalls, citations: turn.citations } } },
      ],
    });
    expect((await dee.delete(`/v1/memories/${doomed}`)).status).toBe(200);
    expect((await dee.post("/v1/memories/batch-delete", { ids: [saved] })).status).toBe(200);
    const events = await h.db.chatEvent.findMany({ where: { messageId: turn.id }, orderBy: { seq: "asc" } });
    expect(JSON.stringify(events.map((e) => e.data))).not.toMatch(/Secret/);
    expect(JSON.stringify(events.map((e) => e.data))).toMatch(/Lunch menu/);
    const row = await h.db.chatMessage.findUniqueOrThrow({ where: { id: turn.id } });
    expect(JSON.stringify([row.toolCalls, row.citations])).not.toMatch(/Secret/);
    // What is still there keeps its title, and the ids stay (the shape the SDK reads).
    expect(row.toolCalls).toEqual([
      expect.objectContaining({ result: { memories: [{ id: doomed, title: "(deleted)", hub_id: hub, relevance_score: 0.9 }, { id: kept, title: "Lunch menu", hub_id: hub, relevance_score: 0.5 }] } }),
      expect.objectContaining({ result: { memory_id: saved, hub_id: hub, title: "(deleted)" } }),
    ]);
    expect(row.citations).toEqual([{ index: 1, memory_id: doomed, title: "(deleted)", hub_id: hub }, { index: 2, memory_id: kept, title: "Lunch menu", hub_id: hub }]);
    const listed = JSON.stringify((await dee.get(`${base}/${s.id}/messages`)).body.data);
    expect(listed).not.toMatch(/Secret/);
  });

  it("a memory moved to a hub a chat's owner cannot read leaves its title only in the chats of those who can", async () => {
    const fay = await h.user("Fay");
    const gus = await h.user("Gus");
    const shared = await h.teamHub(fay, [[gus, "contributor"]]);
    const hidden = await h.teamHub(fay);
    const moving = (await fay.post("/v1/memories", { title: "Secret reorg plan", content: "Secret reorg plan: the body." }, { headers: { "x-hub-id": shared } })).body.data.id as string;
    const storedTurn = async (who: Client) => {
      const s = await session(who, { scope_type: "single_hub", scope_hub_ids: [shared] });
      const user = await h.db.chatMessage.create({ data: { id: newId(), sessionId: s.id, sequence: 1, role: "user", authorUserId: who.id, status: "completed", content: "What is planned?" } });
      const recalled = { memories: [{ id: moving, title: "Secret reorg plan", hub_id: shared, relevance_score: 0.9 }] };
      const turn = await h.db.chatMessage.create({
        data: {
          id: newId(), sessionId: s.id, sequence: 2, role: "assistant", authorUserId: who.id, status: "completed", parentMessageId: user.id, content: "See the plan.",
          toolCalls: [{ id: "c1", name: "recall", arguments: { query: "plans" }, status: "done", result: recalled }],
          citations: [{ index: 1, memory_id: moving, title: "Secret reorg plan", hub_id: shared }],
        },
      });
      await h.db.chatEvent.create({ data: { messageId: turn.id, seq: 1, type: "message.tool_result", data: { tool_call_id: "c1", name: "recall", result: recalled } } });
      return turn.id;
    };
    const [gusTurn, fayTurn] = [await storedTurn(gus), await storedTurn(fay)];
    const moved = await fay.post("/v1/memories/batch-move", { ids: [moving], hub_id: hidden });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.moved).toBe(1);
    const quoted = async (messageId: string) => {
      const row = await h.db.chatMessage.findUniqueOrThrow({ where: { id: messageId } });
      const events = await h.db.chatEvent.findMany({ where: { messageId } });
      return JSON.stringify([row.toolCalls, row.citations, events.map((e) => e.data)]);
    };
    // Gus can no longer read it: his chat shows it moved, as the hub it left does everywhere else.
    expect(await quoted(gusTurn)).not.toMatch(/Secret/);
    expect(await quoted(gusTurn)).toMatch(/\(moved\)/);
    // Fay still reads it where it went: her chat keeps its title.
    expect(await quoted(fayTurn)).toMatch(/Secret reorg plan/);
    expect(await quoted(fayTurn)).not.toMatch(/\(moved\)/);
  });

  it("a memory hard-deleted while a turn runs is not written back by the turn's end: its tool results and citations show it deleted", async () => {
    const eve = await h.user("Eve");
    const hub = await h.teamHub(eve);
    const pushed = await eve.post("/v1/memories", { content: "# Vault code\nThe vault code rotates on the first Monday of each month." }, { headers: { "x-hub-id": hub } });
    await waitProcessed(h.db, eve, pushed.body.data.id);
    const s = await session(eve, { scope_type: "single_hub", scope_hub_ids: [hub] });
    // The memory goes (its delete's scrub finding nothing of this turn stored yet) right after the recall
    // found it; the turn still holds its title and passage, and writes them at its end.
    await h.db.$executeRawUnsafe(`CREATE FUNCTION gone_after_recall() RETURNS trigger AS $$ BEGIN
      IF NEW.type = 'message.tool_result' THEN DELETE FROM memories WHERE id = '${pushed.body.data.id}'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER gone_after_recall AFTER INSERT ON chat_events FOR EACH ROW EXECUTE FUNCTION gone_after_recall()`);
    let sent: { active_message_id: string };
    try {
      sent = (await send(eve, s.id, "When does the vault code rotate?")).body.data;
      await chatTurnsIdle();
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER gone_after_recall ON chat_events`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION gone_after_recall()`);
    }
    const row = await h.db.chatMessage.findUniqueOrThrow({ where: { id: sent.active_message_id } });
    expect(row.status).toBe("completed");
    expect(JSON.stringify(row.toolCalls)).toMatch(/\(deleted\)/);
    expect(JSON.stringify([row.toolCalls, row.citations])).not.toMatch(/Vault code/);
    const events = await h.db.chatEvent.findMany({ where: { messageId: row.id } });
    const quoted = events.map((e) => {
      const data = e.data as { result?: unknown; message?: { tool_calls?: unknown; citations?: unknown } };
      return [data.result, data.message?.tool_calls, data.message?.citations];
    });
    expect(JSON.stringify(quoted)).not.toMatch(/Vault code/);
  });

  it("a turn taken over after its worker died does not quote the sources it recalled from a hub the owner has lost since", async () => {
    const s = await session(bob, { scope_type: "single_hub", scope_hub_ids: [teamHubId] });
    // The worker dies right after its recall: the moment the recall's result is logged, another worker takes the turn.
    await h.db.$executeRawUnsafe(`CREATE FUNCTION steal_chat_recall() RETURNS trigger AS $$ BEGIN
      IF NEW.type = 'message.tool_result' THEN UPDATE chat_messages SET lease_owner = 'dead-worker', heartbeat_at = now() WHERE id = NEW.message_id; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER steal_chat_recall AFTER INSERT ON chat_events FOR EACH ROW EXECUTE FUNCTION steal_chat_recall()`);
    let sent: { active_message_id: string };
    try {
      sent = (await send(bob, s.id, "When does the on-call rotation hand over?")).body.data;
      await chatTurnsIdle();
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER steal_chat_recall ON chat_events`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION steal_chat_recall()`);
    }
    // Unfinished, the turn still holds the passages it recalled (what a worker taking over answers from).
    const dead = await h.db.chatMessage.findUniqueOrThrow({ where: { id: sent.active_message_id } });
    expect(dead).toMatchObject({ status: "running", leaseOwner: "dead-worker", content: "" });
    expect(JSON.stringify(dead.toolCalls)).toMatch(/Wednesdays at noon/);
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { heartbeatAt: new Date(Date.now() - 5 * 60_000) } });
    await h.db.hubMember.delete({ where: { hubId_userId: { hubId: teamHubId, userId: bob.id } } });
    try {
      expect(await runChatTurn(h.database, sent.active_message_id, "rescuer")).toBe("finished");
      await chatTurnsIdle();
      const after = await h.db.chatMessage.findUniqueOrThrow({ where: { id: sent.active_message_id } });
      expect(after.status).toBe("completed");
      expect(after.scopeHubIdsUsed).toEqual([]);
      expect(after.content).not.toMatch(/Wednesdays/);
      expect(after.citations).toEqual([]);
      expect(JSON.stringify(after.toolCalls)).not.toMatch(/Wednesdays/);
    } finally {
      await h.db.hubMember.create({ data: { hubId: teamHubId, userId: bob.id, role: "contributor" } });
    }
  });

  it("an approved save whose worker lost the turn mid-save is saved once: the worker that takes over adds no second memory", async () => {
    const s = await session(ann);
    const text = "the build cache is wiped on the first of each month.";
    const sent = (await send(ann, s.id, `Remember that ${text}`)).body.data;
    await chatTurnsIdle();
    const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: sent.active_message_id } });
    // Approved as the decision route does, without handing the turn to this process's runner.
    await h.db.chatApproval.update({ where: { id: approval.id }, data: { status: "approved", decidedAt: new Date(), credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null } } });
    await h.db.chatSession.update({ where: { id: s.id }, data: { status: "running" } });
    // The moment the memory row is written, another worker takes the turn over (this one looked dead).
    await h.db.$executeRawUnsafe(`CREATE FUNCTION steal_chat_lease() RETURNS trigger AS $$ BEGIN
      UPDATE chat_messages SET lease_owner = 'dead-worker', heartbeat_at = now() - interval '5 minutes' WHERE id = '${sent.active_message_id}'; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await h.db.$executeRawUnsafe(`CREATE TRIGGER steal_chat_lease AFTER INSERT ON memories FOR EACH ROW EXECUTE FUNCTION steal_chat_lease()`);
    try {
      expect(await runChatTurn(h.database, sent.active_message_id, "slow-worker")).toBe("skipped");
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER steal_chat_lease ON memories`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION steal_chat_lease()`);
    }
    // Meanwhile the owner edits what the chat saved (if anything): identical content no longer dedups it.
    for (const m of await h.db.memory.findMany({ where: { hubId: ann.personalHubId, content: text } })) {
      expect((await ann.patch(`/v1/memories/${m.id}`, { content: `${text} Except in December.` })).status).toBe(200);
    }
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { leaseOwner: "dead-worker", heartbeatAt: new Date(Date.now() - 5 * 60_000) } });
    expect(await runChatTurn(h.database, sent.active_message_id, "rescuer")).toBe("finished");
    const saved = await h.db.memory.findMany({ where: { hubId: ann.personalHubId, content: { startsWith: text } } });
    expect(saved).toHaveLength(1);
    const answer = (await ann.get(`${base}/${s.id}/messages/${sent.active_message_id}`)).body.data;
    expect(answer.content).toMatch(/^Saved to “Personal”/);
    expect(answer.tool_calls).toEqual([expect.objectContaining({ name: "push_memory", status: "done", result: expect.objectContaining({ memory_id: saved[0]!.id }) })]);
    const results = await h.db.chatEvent.count({ where: { messageId: sent.active_message_id, type: "message.tool_result" } });
    expect(results).toBe(1);
    // Processed before the tests below configure a chat model (its classify call is not theirs).
    await waitProcessed(h.db, ann, saved[0]!.id);
  });

  it("on the embedded database, a turn leased by the process that stopped is run as soon as the server starts", async () => {
    if (h.database.kind !== "pglite") return; // PostgreSQL: other processes may be alive, so their leases age out (above)
    const s = await session(ann);
    const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
    await chatTurnsIdle();
    // The turn as a process killed a moment ago left it: leased, its heartbeat fresh, nothing written yet.
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { status: "running", leaseOwner: "killed-process", heartbeatAt: new Date(), content: "" } });
    await h.db.chatEvent.deleteMany({ where: { messageId: sent.active_message_id, type: { in: ["message.text", "message.completed"] } } });
    await h.db.chatSession.update({ where: { id: s.id }, data: { status: "running", activeMessageId: sent.active_message_id } });
    stopChatTurns();
    await startChatTurns();
    await chatTurnsIdle();
    expect((await h.db.chatMessage.findUniqueOrThrow({ where: { id: sent.active_message_id } })).status).toBe("completed");
    expect((await ann.get(`${base}/${s.id}`)).body.data.status).toBe("idle");
    stopChatTurns();
  });

  it(`holds at most ${MAX_CHAT_STREAMS_PER_USER} answer streams per user open at once, even when they open together`, async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "Remember that the VPN certificate renews in March.")).body.data;
    await chatTurnsIdle();
    // The turn waits on its approval, so every stream stays open, reading the log while it waits.
    const opened = await Promise.all(Array.from({ length: MAX_CHAT_STREAMS_PER_USER + 5 }, () => openSse(ann.key, sent.resume_url)));
    const live = opened.filter((st) => st.status === 200);
    const refused = opened.filter((st) => st.status === 429);
    expect([live.length, refused.length]).toEqual([MAX_CHAT_STREAMS_PER_USER, 5]);
    expect(JSON.parse(refused[0]!.text!).error).toMatchObject({ code: "rate_limited", details: { limit: MAX_CHAT_STREAMS_PER_USER } });
    await live.pop()!.close();
    let again = await openSse(ann.key, sent.resume_url);
    for (let tries = 0; again.status !== 200 && tries < 50; tries++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await openSse(ann.key, sent.resume_url);
    }
    expect(again.status).toBe(200);
    live.push(again);
    const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: sent.active_message_id } });
    expect((await ann.post(`${base}/${s.id}/approvals/${approval.id}`, { decision: "deny" })).status).toBe(200);
    // The turn ends, and with it every stream and the places they held.
    await Promise.all(live.map((st) => st.ended));
    expect((await openSse(ann.key, sent.resume_url)).status).toBe(200);
  });

  it("a stream whose reading of the log fails midway ends with an error event, not silently", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "Remember that the VPN certificate renews in June.")).body.data;
    await chatTurnsIdle();
    // The turn waits on its approval, so its stream stays open, reading the log while it waits.
    const stream = await openSse(ann.key, sent.resume_url);
    await stream.waitFor((e) => e.event === "approval.required");
    // The log becomes unreadable under the open stream (a database failing mid-stream).
    await h.db.$executeRawUnsafe(`ALTER TABLE chat_events RENAME TO chat_events_away`);
    try {
      const error = await stream.waitFor((e) => e.event === "error");
      expect(error.data).toEqual({ code: "internal", message: "The stream failed on the server" });
      await stream.ended;
    } finally {
      await h.db.$executeRawUnsafe(`ALTER TABLE chat_events_away RENAME TO chat_events`);
    }
    const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: sent.active_message_id } });
    expect((await ann.post(`${base}/${s.id}/approvals/${approval.id}`, { decision: "deny" })).status).toBe(200);
    await chatTurnsIdle();
  });

  it("expires the replay after 24 hours", async () => {
    const s = await session(ann);
    const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
    await chatTurnsIdle();
    await h.db.chatMessage.update({ where: { id: sent.active_message_id }, data: { createdAt: new Date(Date.now() - 25 * 3_600_000) } });
    const res = await ann.get(sent.resume_url);
    expect([res.status, res.body.error.code]).toEqual([410, "chat_replay_expired"]);
    expect((await ann.get(sent.resume_url.replace(/[^/]+\/stream$/, `${sent.user_message_id}/stream`))).status).toBe(400);
  });
});

describe("with a chat model (a local fake of the OpenAI API)", () => {
  let fake: FakeChat;
  const saved = { ...process.env };
  beforeAll(async () => {
    fake = await startFakeChat();
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url });
  });
  afterEach(() => {
    fake.requests.length = 0;
  });
  afterAll(async () => {
    for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"]) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
    await fake?.close();
  });

  it("streams the model's answer in the account's default persona, with the conversation so far and [n] citations", async () => {
    const persona = await ann.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "SOUL.md", content: "# Captain\nSpeak like a ship's captain." });
    expect(persona.status).toBe(201);
    expect((await ann.patch("/v1/settings", { chat_default_persona_id: "00000000-0000-7000-8000-000000000000" })).status).toBe(404);
    expect((await ann.patch("/v1/settings", { chat_default_persona_id: persona.body.data.id })).body.data.chat_default_persona_id).toBe(persona.body.data.id);
    const s = await session(ann);
    expect((await ann.get(`${base}/${s.id}`)).body.data.model).toBe("gpt-fake");
    fake.reply = "Aye, the freeze starts Friday at 18:00 [1].";
    const first = await answered(ann, s.id, (await send(ann, s.id, "When does the deploy freeze start?")).body.data.active_message_id);
    expect(first).toMatchObject({ status: "completed", content: fake.reply, usage: { model: "gpt-fake" } });
    expect(first.citations).toEqual([expect.objectContaining({ index: 1, title: "Deploy freeze" })]);
    const [system, user] = fake.requests[0].messages;
    expect(system.content).toContain("Speak like a ship's captain.");
    expect(user.content).toContain("Question: When does the deploy freeze start?");
    expect(user.content).not.toContain("Earlier in this conversation");

    fake.reply = "Two approvals, captain's orders [1].";
    await answered(ann, s.id, (await send(ann, s.id, "What do hotfixes need during the deploy freeze?")).body.data.active_message_id);
    const followUp = fake.requests.at(-1).messages[1].content;
    expect(followUp).toContain("Earlier in this conversation");
    expect(followUp).toContain("assistant: Aye, the freeze starts Friday at 18:00 [1].");

    // "none" turns the persona off for one session; "local" keeps the model out of it.
    const plain = await session(ann, { scope_type: "user_all_hubs", persona_id: "none" });
    fake.reply = "Friday [1].";
    await answered(ann, plain.id, (await send(ann, plain.id, "When does the deploy freeze start?")).body.data.active_message_id);
    expect(fake.requests.at(-1).messages[0].content).not.toContain("captain");
    fake.requests.length = 0;
    const local = await session(ann, { scope_type: "user_all_hubs", model: "local" });
    const extractive = await answered(ann, local.id, (await send(ann, local.id, "When does the deploy freeze start?")).body.data.active_message_id);
    expect(fake.requests).toHaveLength(0);
    expect(extractive.content).toMatch(/Friday at 18:00/);
    await ann.patch("/v1/settings", { chat_default_persona_id: "" });
  });

  // The history sent with a question quoted every earlier answer, also one written from a hub the
  // caller has since lost: the model was handed what they can no longer read.
  it("leaves out of the conversation so far an answer that read a hub the caller can no longer read", async () => {
    const launchHub = await h.teamHub(ann);
    // Processed as the file's other memories were, without the chat model (the fake only streams).
    const model = process.env.ENGRAM_CHAT_MODEL;
    delete process.env.ENGRAM_CHAT_MODEL;
    try {
      const pushed = await ann.post("/v1/memories", { content: "# Launch codename\nThe launch codename for the spring release is Nightjar." }, { headers: { "x-hub-id": launchHub } });
      expect(pushed.status).toBe(201);
      await waitProcessed(h.db, ann, pushed.body.data.id);
    } finally {
      process.env.ENGRAM_CHAT_MODEL = model;
    }
    const s = await session(bob);
    fake.reply = "KEEP-ROTATION: Wednesdays at noon [1].";
    await answered(bob, s.id, (await send(bob, s.id, "When does the incident rotation hand over?")).body.data.active_message_id);
    await h.db.hubMember.create({ data: { hubId: launchHub, userId: bob.id, role: "viewer" } });
    fake.reply = "SECRET-NIGHTJAR is the codename [1].";
    const secret = await answered(bob, s.id, (await send(bob, s.id, "What is the launch codename for the spring release?")).body.data.active_message_id);
    expect(secret.scope_hub_ids_used).toContain(launchHub);
    expect((await ann.delete(`/v1/hubs/${launchHub}/members/${bob.id}`)).status).toBe(200);

    fake.reply = "Wednesdays [1].";
    await answered(bob, s.id, (await send(bob, s.id, "Who gets the pager after the incident rotation hands over?")).body.data.active_message_id);
    const prompt = fake.requests.at(-1).messages[1].content as string;
    expect(prompt).toContain("assistant: KEEP-ROTATION: Wednesdays at noon [1].");
    expect(prompt).not.toContain("SECRET-NIGHTJAR");
    expect(prompt).not.toContain("Nightjar");
  });

  it("a persona deleted since it was chosen (the account's default, or a session's) no longer speaks", async () => {
    const persona = await ann.put("/v1/configs", { agent: "claude-code", scope: "global", file_path: "personas/pirate.md", content: "# Pirate\nTalk like a pirate, arr." });
    expect(persona.status).toBe(201);
    const id = persona.body.data.id as string;
    expect((await ann.patch("/v1/settings", { chat_default_persona_id: id })).status).toBe(200);
    const inherits = await session(ann);
    const chosen = await session(ann, { scope_type: "user_all_hubs", persona_id: id });
    try {
      fake.reply = "Friday [1].";
      await answered(ann, inherits.id, (await send(ann, inherits.id, "When does the deploy freeze start?")).body.data.active_message_id);
      expect(fake.requests.at(-1).messages[0].content).toContain("Talk like a pirate");
      expect((await ann.delete(`/v1/personas/${id}`)).status).toBe(200);
      expect(((await ann.get("/v1/personas")).body.data.personas as { id: string }[]).map((p) => p.id)).not.toContain(id);
      for (const s of [inherits, chosen]) {
        fake.requests.length = 0;
        const answer = await answered(ann, s.id, (await send(ann, s.id, "When does the deploy freeze start?")).body.data.active_message_id);
        expect(answer.status).toBe("completed");
        expect(fake.requests.at(-1).messages[0].content).not.toContain("pirate");
      }
    } finally {
      await ann.patch("/v1/settings", { chat_default_persona_id: "" });
    }
  });

  it("a cancel or a delete stops a turn whose model is still thinking at once, not when the model's time runs out", async () => {
    fake.stall = true;
    // Long next to the bound below: without the stop, the turn ends only when this runs out.
    process.env.ENGRAM_ASK_MODEL_TIMEOUT_MS = "8000";
    try {
      const s = await session(ann);
      const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
      const waitForModel = async (count: number) => {
        for (const deadline = Date.now() + 5_000; fake.requests.length < count; ) {
          if (Date.now() > deadline) throw new Error("the model was never called");
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      await waitForModel(1);
      const started = performance.now();
      expect((await ann.post(`${base}/${s.id}/messages/${sent.active_message_id}/cancel`)).body.data.cancel_registered).toBe(true);
      const answer = await answered(ann, s.id, sent.active_message_id);
      expect(performance.now() - started).toBeLessThan(4_000);
      expect(answer.status).toBe("canceled");
      expect((await ann.get(`${base}/${s.id}`)).body.data.status).toBe("idle");

      // Deleting the chat cancels its turn the same way.
      const next = (await send(ann, s.id, "When does the deploy freeze start again?")).body.data;
      await waitForModel(2);
      const deleting = performance.now();
      expect((await ann.delete(`${base}/${s.id}`)).status).toBe(200);
      await chatTurnsIdle();
      expect(performance.now() - deleting).toBeLessThan(4_000);
      expect((await h.db.chatMessage.findUniqueOrThrow({ where: { id: next.active_message_id } })).status).toBe("canceled");
    } finally {
      fake.stall = false;
      delete process.env.ENGRAM_ASK_MODEL_TIMEOUT_MS;
    }
  });

  it("a model that runs out of time says so: before writing, in the extractive answer's fallback_reason; midway, as the turn's error", async () => {
    const s = await session(ann);
    fake.stall = true;
    process.env.ENGRAM_ASK_MODEL_TIMEOUT_MS = "300";
    try {
      const before = await answered(ann, s.id, (await send(ann, s.id, "When does the deploy freeze start?")).body.data.active_message_id);
      // The timeout is our own words, safe to show, as ask's fallback_reason shows them.
      expect(before).toMatchObject({ status: "completed", usage: { model: "local", fallback_reason: "chat model failed: the chat model did not finish within 300 ms" } });
      expect(before.content).toMatch(/Friday at 18:00/);

      fake.stall = false;
      // Past the first piece of text (about 200 characters), so some of the answer has gone out.
      fake.reply = `${"The freeze starts on Friday at 18:00 and lasts until Monday morning. ".repeat(5)}[1].`;
      fake.stallAfterWords = 40;
      const midway = await answered(ann, s.id, (await send(ann, s.id, "When does the deploy freeze end?")).body.data.active_message_id);
      expect(midway).toMatchObject({ status: "partial_failed", error: { code: "unavailable", message: "The chat model did not finish within 300 ms" } });
      expect(midway.content.length).toBeGreaterThan(0);
      expect(fake.reply.startsWith(midway.content)).toBe(true);
    } finally {
      fake.stall = false;
      fake.stallAfterWords = undefined;
      delete process.env.ENGRAM_ASK_MODEL_TIMEOUT_MS;
    }
  });

  it("a model that fails before writing is replaced by the extractive answer, which says why", async () => {
    const s = await session(ann);
    fake.fail = true;
    try {
      const sent = (await send(ann, s.id, "When does the deploy freeze start?")).body.data;
      const answer = await answered(ann, s.id, sent.active_message_id);
      expect(answer).toMatchObject({ status: "completed", usage: { model: "local", fallback_reason: `chat model failed (details in the server log, message ${sent.active_message_id})` } });
      // The provider's own words stay in the server's log.
      expect(JSON.stringify(answer)).not.toContain("upstream exploded");
      expect(answer.content).toMatch(/Friday at 18:00/);
    } finally {
      fake.fail = false;
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makePng } from "../support/make-files.ts";
import { loadSdk, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// Memax's SDK methods no other compat file calls: configs, personas, uploads and attachments,
// custom boards, the rest of chats, notifications' items, onboarding, dream report/trigger and
// the token calls. Each answer is checked against the shape in the SDK's types.ts.

let engram: Engram;
let ann: EngramUser;
let bob: EngramUser;
let Memax: Awaited<ReturnType<typeof loadSdk>>["Memax"];
let MemaxError: Awaited<ReturnType<typeof loadSdk>>["MemaxError"];
let sdk: any;

beforeAll(async () => {
  ({ Memax, MemaxError } = await loadSdk());
  engram = await startEngram();
  ann = await engram.user("Ann");
  bob = await engram.user("Bob");
  sdk = new Memax({ apiUrl: engram.url, apiKey: ann.key, maxRetries: 0 });
});
afterAll(async () => {
  await engram?.stop();
});

const isoTime = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

async function refused(promise: Promise<unknown>): Promise<any> {
  const error: any = await promise.then(
    () => undefined,
    (e) => e,
  );
  expect(error, "expected the SDK to throw").toBeInstanceOf(MemaxError);
  return error;
}

describe("configs", () => {
  let id: string;

  it("upsert, get and list answer AgentConfig", async () => {
    const config = await sdk.configs.upsert({ agent: "claude-code", file_path: "CLAUDE.md", scope: "global", content: "# Rules\n\nUse pnpm.\n" });
    expect(config).toMatchObject({
      id: expect.any(String),
      owner_id: ann.id,
      agent: "claude-code",
      file_path: "CLAUDE.md",
      scope: "global",
      content: "# Rules\n\nUse pnpm.\n",
      content_hash: expect.any(String),
      version: 1,
      created_at: isoTime,
      updated_at: isoTime,
    });
    id = config.id;
    expect(await sdk.configs.get(id)).toMatchObject({ id, version: 1 });
    const again = await sdk.configs.upsert({ agent: "claude-code", file_path: "CLAUDE.md", scope: "global", content: "# Rules\n\nUse pnpm 9.\n" });
    expect(again).toMatchObject({ id, version: 2 });
    const list = await sdk.configs.list({ agent: "claude-code" });
    expect(list.configs.map((c: any) => c.id)).toEqual([id]);
    expect((await sdk.configs.list({ agent: "cursor" })).configs).toEqual([]);
  });

  it("sync plans, ack and local-delete resolve", async () => {
    const plan = await sdk.configs.sync({ device_id: "dev-1", configs: [{ agent: "claude-code", file_path: "CLAUDE.md", scope: "global", content_hash: "0".repeat(64), updated_at: new Date().toISOString() }] });
    expect(Array.isArray(plan.actions)).toBe(true);
    expect(plan.actions[0]).toMatchObject({ agent: "claude-code", file_path: "CLAUDE.md", action: expect.any(String) });
    await expect(sdk.configs.ack({ device_id: "dev-1", configs: [{ agent: "claude-code", file_path: "CLAUDE.md", scope: "global", version: 2, content_hash: (await sdk.configs.get(id)).content_hash }] })).resolves.toBeUndefined();
    await expect(sdk.configs.localDelete({ device_id: "dev-1", agent: "claude-code", file_path: "CLAUDE.md", scope: "global" })).resolves.toBeUndefined();
  });

  it("merge answers { merged_content }", async () => {
    const merged = await sdk.configs.merge({ local_content: "a\nb\n", cloud_content: "a\nc\n", file_path: "CLAUDE.md", agent: "claude-code" });
    expect(merged).toMatchObject({ merged_content: expect.stringMatching(/^a\n[\s\S]*b[\s\S]*c|^a\n[\s\S]*c[\s\S]*b/) });
  });

  it("delete, listDeleted and restore bring it back", async () => {
    await sdk.configs.delete(id);
    const deleted = await sdk.configs.listDeleted();
    expect(deleted.configs).toEqual([expect.objectContaining({ agent: "claude-code", file_path: "CLAUDE.md", scope: "global", version: expect.any(Number), deleted_at: isoTime })]);
    const restored = await sdk.configs.restore({ agent: "claude-code", file_path: "CLAUDE.md", scope: "global" });
    expect(restored).toMatchObject({ agent: "claude-code", file_path: "CLAUDE.md", content: "# Rules\n\nUse pnpm 9.\n" });
    expect((await sdk.configs.listDeleted()).configs).toEqual([]);
  });

  it("another user's config is a 404", async () => {
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    const error = await refused(other.configs.get(id));
    expect(error.status).toBe(404);
  });
});

describe("personas", () => {
  let personaId: string;

  it("list, listRevisions, getRevision, restoreRevision and delete", async () => {
    await sdk.configs.upsert({ agent: "openclaw", file_path: "SOUL.md", scope: "global", content: "# Navigator\n\nCalm and precise.\n" });
    await sdk.configs.upsert({ agent: "openclaw", file_path: "SOUL.md", scope: "global", content: "# Navigator\n\nCalm, precise and brief.\n" });
    const { personas } = await sdk.personas.list();
    expect(personas).toEqual([
      expect.objectContaining({ id: expect.any(String), owner_id: ann.id, source_agent: "openclaw", source_scope: "global", source_file_path: "SOUL.md", name: "Navigator", version: 2, created_at: isoTime, updated_at: isoTime }),
    ]);
    personaId = personas[0].id;
    const { revisions } = await sdk.personas.listRevisions(personaId);
    expect(revisions.map((r: any) => r.version)).toEqual([2, 1]);
    expect(revisions[0]).toMatchObject({ id: expect.any(String), persona_id: personaId, owner_id: ann.id, content_hash: expect.any(String), created_at: isoTime });
    expect(revisions[0].content).toBeUndefined();
    const first = await sdk.personas.getRevision(personaId, 1);
    expect(first).toMatchObject({ persona_id: personaId, version: 1, content: "# Navigator\n\nCalm and precise.\n" });
    expect(await sdk.personas.restoreRevision(personaId, 1)).toEqual({ persona_id: personaId, restored_version: 1, head_version: 3 });
    expect((await sdk.personas.list()).personas[0]).toMatchObject({ id: personaId, version: 3, content: "# Navigator\n\nCalm and precise.\n" });
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    expect((await refused(other.personas.listRevisions(personaId))).status).toBe(404);
    expect((await refused(other.personas.getRevision(personaId, 1))).status).toBe(404);
    expect((await refused(other.personas.restoreRevision(personaId, 1))).status).toBe(404);
    expect((await refused(other.personas.delete(personaId))).status).toBe(404);
    expect(await sdk.personas.delete(personaId)).toEqual({ deleted: true });
    expect((await sdk.personas.list()).personas).toEqual([]);
    expect((await refused(sdk.personas.getRevision(personaId, 99))).status).toBe(404);
  });
});

describe("uploads and attachments", () => {
  it("uploads.create, PUT, push with the file_ref, downloadAttachment and attachmentViewURL", async () => {
    const bytes = Buffer.from("Orion backups run nightly at 02:00 UTC.\n");
    const intent = await sdk.uploads.create({ filename: "orion.txt", content_type: "text/plain", size_bytes: bytes.length, purpose: "memory_attachment" });
    expect(intent).toMatchObject({
      object_key: expect.any(String),
      upload_url: expect.any(String),
      headers: expect.any(Object),
      filename: "orion.txt",
      content_type: "text/plain",
      size_bytes: bytes.length,
      purpose: "memory_attachment",
      max_bytes: expect.any(Number),
      expires_in: expect.any(Number),
    });
    const put = await fetch(new URL(intent.upload_url, engram.url), { method: "PUT", headers: intent.headers, body: bytes });
    expect(put.status, await put.text()).toBeLessThan(300);
    const memory = await sdk.memories.push("", { fileRef: { object_key: intent.object_key, filename: "orion.txt", content_type: "text/plain", size_bytes: bytes.length } });
    const full = await sdk.memories.get(memory.id);
    expect(full.attachments).toEqual([expect.objectContaining({ id: expect.any(String), filename: "orion.txt", content_type: "text/plain" })]);
    const attachmentId = full.attachments[0].id;
    const res: Response = await sdk.memories.downloadAttachment(memory.id, attachmentId);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    // A text file is not an inline image: the SDK documents a rejection and a fall-back to download.
    expect((await refused(sdk.memories.attachmentViewURL(memory.id, attachmentId))).status).toBe(415);
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    expect((await refused(other.memories.downloadAttachment(memory.id, attachmentId))).status).toBe(404);
    expect((await refused(other.memories.attachmentViewURL(memory.id, attachmentId))).status).toBe(404);
  });
});

describe("an image's view URL", () => {
  it("attachmentViewURL answers { url, expires_at } that serves the image", async () => {
    const png = makePng(4, 3);
    const intent = await sdk.uploads.create({ filename: "dot.png", content_type: "image/png", size_bytes: png.length, purpose: "memory_attachment" });
    const put = await fetch(new URL(intent.upload_url, engram.url), { method: "PUT", headers: intent.headers, body: new Uint8Array(png) });
    expect(put.status, await put.text()).toBeLessThan(300);
    const memory = await sdk.memories.push("", { fileRef: { object_key: intent.object_key, filename: "dot.png", content_type: "image/png", size_bytes: png.length } });
    const attachment = (await sdk.memories.get(memory.id)).attachments[0];
    expect(attachment).toMatchObject({ content_type: "image/png", inline_eligible: true });
    const view = await sdk.memories.attachmentViewURL(memory.id, attachment.id);
    expect(view).toEqual({ url: expect.any(String), expires_at: expect.any(Number) });
    expect(view.expires_at).toBeGreaterThan(Date.now() / 1000);
    const img = await fetch(new URL(view.url, engram.url));
    expect(img.status).toBe(200);
    expect(img.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await img.arrayBuffer()).equals(png)).toBe(true);
  });
});

describe("custom boards", () => {
  it("getForHub, createBoard, updateBoard and deleteBoard", async () => {
    const system = await sdk.boards.getForHub(ann.personalHubId);
    expect(system).toMatchObject({ board: { id: expect.any(String), hub_id: ann.personalHubId, kind: "system", status: expect.any(String), created_at: isoTime, updated_at: isoTime }, slots: expect.any(Array) });
    const { board } = await sdk.boards.createBoard(ann.personalHubId, { title: "Risks", instruction: "List the open risks." });
    expect(board).toMatchObject({ id: expect.any(String), hub_id: ann.personalHubId, created_by: ann.id, kind: "custom", title: "Risks", instruction: "List the open risks.", status: expect.stringMatching(/^(cooking|active)$/) });
    const updated = await sdk.boards.updateBoard(ann.personalHubId, board.id, { title: "Open risks", status: "paused" });
    expect(updated.board).toMatchObject({ id: board.id, title: "Open risks", status: "paused" });
    expect(await sdk.boards.deleteBoard(ann.personalHubId, board.id)).toEqual({ deleted: true });
    expect((await refused(sdk.boards.getBoard(ann.personalHubId, board.id))).status).toBe(404);
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    expect((await refused(other.boards.getForHub(ann.personalHubId))).status).toBe(404);
  });
});

describe("chats", () => {
  it("listTools answers ChatToolDescriptor[]", async () => {
    const tools = await sdk.chats.listTools();
    expect(tools.length).toBeGreaterThan(0);
    for (const tool of tools) {
      expect(tool).toMatchObject({ name: expect.any(String), description: expect.any(String), default_in_chat: expect.any(Boolean), approval_required: expect.any(Boolean), available: expect.any(Boolean) });
    }
  });

  it("listSessions, patchSession, listMessages, cancelMessage, regenerateMessage and deleteSession", async () => {
    const session = await sdk.chats.createSession({ scopeType: "user_all_hubs", title: "First" });
    const listed = await sdk.chats.listSessions();
    expect(listed).toMatchObject({ sessions: [expect.objectContaining({ id: session.id, title: "First" })], next_cursor: expect.any(String), has_more: false });
    const patched = await sdk.chats.patchSession(session.id, { title: "Renamed", pinned: true });
    expect(patched).toMatchObject({ id: session.id, title: "Renamed", pinned_at: isoTime });
    expect((await sdk.chats.listSessions({ pinned: true })).sessions.map((s: any) => s.id)).toEqual([session.id]);

    const sent = await sdk.chats.sendMessage(session.id, { content: "What do we know about orion?", idempotencyKey: "gap-1" });
    let settled: any;
    for (let i = 0; i < 240; i++) {
      settled = await sdk.chats.getMessage(session.id, sent.active_message_id);
      if (["completed", "partial_failed", "failed"].includes(settled.status)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(settled.status).toMatch(/^(completed|partial_failed|failed)$/);
    // A finished turn: the cancel changes nothing and says so.
    const cancel = await sdk.chats.cancelMessage(session.id, sent.active_message_id);
    expect(cancel).toEqual({ assistant_message_id: sent.active_message_id, session_id: session.id, status: settled.status, cancel_registered: false });
    const messages = await sdk.chats.listMessages(session.id);
    expect(messages).toMatchObject({ messages: expect.any(Array), next_cursor: expect.any(String), has_more: false });
    expect(messages.messages.map((m: any) => m.role)).toEqual(["user", "assistant"]);
    const regen = await sdk.chats.regenerateMessage(session.id, sent.active_message_id);
    expect(regen).toMatchObject({ outcome: "fresh", prior_assistant_id: sent.active_message_id, prior_assistant_status: settled.status, active_message_id: expect.any(String), resume_url: expect.any(String) });
    expect(regen.assistant_message).toMatchObject({ id: regen.active_message_id, parent_message_id: sent.active_message_id, role: "assistant" });
    // A regenerate of an answer that was replaced is refused as the SDK's error.
    expect((await refused(sdk.chats.regenerateMessage(session.id, sent.active_message_id))).status).toBe(409);
    for (let i = 0; i < 240; i++) {
      const m = await sdk.chats.getMessage(session.id, regen.active_message_id);
      if (["completed", "partial_failed", "failed", "canceled"].includes(m.status)) break;
      await new Promise((r) => setTimeout(r, 250));
    }

    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    expect((await refused(other.chats.getSession(session.id))).status).toBe(404);
    expect((await refused(other.chats.listMessages(session.id))).status).toBe(404);
    expect((await refused(other.chats.patchSession(session.id, { title: "Mine" }))).status).toBe(404);
    expect((await refused(other.chats.deleteSession(session.id))).status).toBe(404);
    expect((await other.chats.listSessions()).sessions).toEqual([]);
    await expect(sdk.chats.deleteSession(session.id)).resolves.toBeUndefined();
    expect((await refused(sdk.chats.getSession(session.id))).status).toBe(404);
  });
});

describe("notifications and onboarding", () => {
  it("onboarding.state and restart, then viewItem, completeItem and dismiss on the checklist", async () => {
    const before = await sdk.onboarding.state();
    expect(before).toMatchObject({ has_prior: expect.any(Boolean), current_version: expect.any(Number) });
    const checklist = await sdk.onboarding.restart();
    expect(checklist).toMatchObject({ id: expect.any(String), status: expect.any(String) });
    const after = await sdk.onboarding.state();
    expect(after).toMatchObject({ has_prior: true, current_version: before.current_version + 1 });
    const items = (checklist.payload?.items ?? checklist.items) as any[];
    expect(items?.length, JSON.stringify(checklist)).toBeGreaterThan(0);
    const item = items[0];
    const viewed = await sdk.notifications.viewItem(checklist.id, item.id);
    expect(viewed).toMatchObject({ item_id: item.id, viewed_at: isoTime });
    const completed = await sdk.notifications.completeItem(checklist.id, item.id);
    expect(completed).toMatchObject({ item_id: item.id, completed_at: isoTime });
    // A checklist is dismissed through resolve; dismiss is for receipts.
    expect((await refused(sdk.notifications.dismiss(checklist.id))).status).toBe(400);
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    expect((await refused(other.notifications.dismiss(checklist.id))).status).toBe(404);
    expect((await refused(other.notifications.viewItem(checklist.id, item.id))).status).toBe(404);
    expect(await sdk.notifications.resolve(checklist.id, "dismiss")).toMatchObject({ status: "resolved", action: "dismiss" });
  });

  it("dismiss on a receipt: Bob joining Ann's hub", async () => {
    const team = await sdk.hubs.create("Receipts");
    const invite = await sdk.hubs.createInvite(team.id, { role: "viewer" });
    const other = new Memax({ apiUrl: engram.url, apiKey: bob.key, maxRetries: 0 });
    await other.invites.accept(invite.token);
    const { notifications } = await sdk.notifications.list({ kind: ["hub_member_joined"] });
    expect(notifications).toHaveLength(1);
    expect(await sdk.notifications.dismiss(notifications[0].id)).toEqual({ status: "dismissed" });
    expect((await sdk.notifications.list({ kind: ["hub_member_joined"] })).notifications).toEqual([]);
  });
});

describe("dreams", () => {
  it("report with no runs and trigger answer their shapes", async () => {
    const report = await sdk.dreams.report();
    expect(report).toMatchObject({ has_run: false, intelligence: { pending_review: { contradictions: 0, topic_merges: 0, topic_restructures: 0, total: 0 } } });
    expect(await sdk.dreams.trigger()).toMatchObject({ status: expect.any(String) });
  });
});

describe("auth tokens", () => {
  it("impersonate answers a token that acts as the user; refresh of a junk token is a 401", async () => {
    const admin = new Memax({ apiUrl: engram.url, apiKey: engram.adminToken, maxRetries: 0 });
    const result = await admin.auth.impersonate({ userId: ann.id });
    expect(result).toMatchObject({ access_token: expect.any(String), expires_in: 900, target_id: ann.id, impersonated: true });
    const asAnn = new Memax({ apiUrl: engram.url, apiKey: result.access_token, maxRetries: 0 });
    expect(JSON.stringify(await asAnn.auth.me())).toContain(ann.id);
    expect((await refused(sdk.auth.refresh("not-a-token"))).status).toBe(401);
    expect((await refused(sdk.auth.exchangeCode("not-a-code"))).status).toBeGreaterThanOrEqual(400);
  });

  it("requestEmailOtp without SMTP is refused with 403", async () => {
    const anon = new Memax({ apiUrl: engram.url, maxRetries: 0 });
    expect((await refused(anon.auth.requestEmailOtp({ email: "ann@example.test" }))).status).toBe(403);
  });
});

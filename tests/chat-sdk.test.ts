import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatTurnsIdle } from "@/lib/chat/chat-turn-runner.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";

// Memax's own SDK drives every chat endpoint it has (its chats resource), including its SSE
// stream with Last-Event-ID resume, against the route handlers.

let h: Harness;
let ann: Client;
let sdk: any;

/** The SDK's streamMessage, collected until the terminal event. */
function collect(sessionId: string, messageId: string, lastEventId?: string): Promise<{ event: string; data: any }[]> {
  return new Promise((resolve, reject) => {
    const events: { event: string; data: any }[] = [];
    const timer = setTimeout(() => reject(new Error(`stream timed out: ${JSON.stringify(events)}`)), 10_000);
    const controller = sdk.chats.streamMessage(sessionId, messageId, {
      lastEventId,
      onEvent: (event: string, data: any) => {
        events.push({ event, data });
        if (event.startsWith("message.") && ["completed", "partial_failed", "failed", "canceled"].includes(event.slice(8))) {
          clearTimeout(timer);
          controller.abort();
          resolve(events);
        }
      },
      onClose: () => {
        clearTimeout(timer);
        resolve(events);
      },
    });
  });
}

beforeAll(async () => {
  h = await createHarness();
  await startBackgroundProcessing();
  ann = await h.user("Ann");
  const res = await ann.post("/v1/memories", { content: "# Release train\nThe release train leaves every other Thursday; the cut-off is Wednesday 17:00." });
  await waitProcessed(h.db, ann, res.body.data.id);
  const { Memax } = await loadMemaxSdk();
  sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: routeFetch, maxRetries: 0 });
});
afterAll(async () => {
  stopBackgroundProcessing();
  await chatTurnsIdle();
  await h?.close();
});

describe("Memax SDK: chats", () => {
  it("lists tools, creates, sends, streams, resumes, lists, regenerates, patches and deletes", async () => {
    const tools = await sdk.chats.listTools();
    expect(tools.filter((t: { available: boolean }) => t.available).map((t: { name: string }) => t.name)).toEqual(["recall", "push_memory"]);

    const session = await sdk.chats.createSession({ scopeType: "single_hub", scopeHubIds: [ann.personalHubId], title: "Releases" });
    expect(session).toMatchObject({ scope_type: "single_hub", scope_hub_ids: [ann.personalHubId], status: "idle", title: "Releases" });

    const sent = await sdk.chats.sendMessage(session.id, { content: "When is the release cut-off?", idempotencyKey: "sdk-1" });
    expect(sent).toMatchObject({ outcome: "fresh", assistant_message: { role: "assistant" } });
    const events = await collect(session.id, sent.active_message_id);
    expect(events.map((e) => e.event)).toContain("message.tool_result");
    expect(events.at(-1)).toMatchObject({ event: "message.completed", data: { message: { status: "completed" } } });
    expect(events.at(-1)!.data.message.content).toMatch(/Wednesday 17:00/);
    const resumed = await collect(session.id, sent.active_message_id, String(events.at(-2)!.data.seq));
    expect(resumed.map((e) => e.event)).toEqual(["message.completed"]);

    const replay = await sdk.chats.sendMessage(session.id, { content: "When is the release cut-off?", idempotencyKey: "sdk-1" });
    expect(replay).toMatchObject({ outcome: "replay", active_message_id: sent.active_message_id });

    const message = await sdk.chats.getMessage(session.id, sent.active_message_id);
    expect(message.citations[0]).toMatchObject({ title: "Release train" });
    const regenerated = await sdk.chats.regenerateMessage(session.id, sent.active_message_id);
    expect(regenerated).toMatchObject({ outcome: "fresh", prior_assistant_id: sent.active_message_id, prior_assistant_status: "completed" });
    await chatTurnsIdle();
    const listed = await sdk.chats.listMessages(session.id, { limit: 10 });
    expect(listed.messages.map((m: { id: string }) => m.id)).toEqual([sent.user_message_id, regenerated.active_message_id]);
    expect(listed).toMatchObject({ has_more: false, next_cursor: "" });
    const canceled = await sdk.chats.cancelMessage(session.id, regenerated.active_message_id);
    expect(canceled).toMatchObject({ status: "completed", cancel_registered: false });

    const patched = await sdk.chats.patchSession(session.id, { title: "Release questions", pinned: true, writeHubId: ann.personalHubId });
    expect(patched).toMatchObject({ title: "Release questions", write_hub_id: ann.personalHubId, pinned_at: expect.any(String) });
    expect((await sdk.chats.listSessions({ pinned: true })).sessions.map((s: { id: string }) => s.id)).toEqual([session.id]);
    expect((await sdk.chats.getSession(session.id)).message_count).toBe(3);
    await sdk.chats.deleteSession(session.id);
    await expect(sdk.chats.getSession(session.id)).rejects.toMatchObject({ status: 404 });
  });

  it("approves a save the agent asks for, and reports a second decision as already decided", async () => {
    const session = await sdk.chats.createSession({ scopeType: "user_all_hubs" });
    const sent = await sdk.chats.sendMessage(session.id, { content: "Remember that the release train skips the week of Christmas.", idempotencyKey: "sdk-2" });
    const required = await new Promise<any>((resolve) => {
      const controller = sdk.chats.streamMessage(session.id, sent.active_message_id, {
        onEvent: (event: string, data: any) => {
          if (event === "approval.required") {
            controller.abort();
            resolve(data);
          }
        },
      });
    });
    await expect(sdk.chats.sendMessage(session.id, { content: "Anything else?", idempotencyKey: "sdk-3" })).rejects.toMatchObject({ status: 409, code: "chat_session_locked" });
    expect(await sdk.chats.decideApproval(session.id, required.approval_id, "approve")).toEqual({ approval_id: required.approval_id, status: "approved" });
    const events = await collect(session.id, sent.active_message_id);
    expect(events.at(-1)!.data.message.content).toMatch(/^Saved to “Personal”/);
    await expect(sdk.chats.decideApproval(session.id, required.approval_id, "deny")).rejects.toMatchObject({ status: 409, code: "chat_approval_already_decided" });
    const saved = await h.db.memory.findMany({ where: { ownerId: ann.id, source: "chat" } });
    expect(saved).toHaveLength(1);
    await waitProcessed(h.db, ann, saved[0]!.id);
  });
});

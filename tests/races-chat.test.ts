import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatTurnsIdle } from "@/lib/chat/chat-turn-runner.ts";
import { runChatTurn } from "@/lib/chat/run-chat-turn.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, type ApiResponse, type Client, type Harness } from "./support/harness.ts";

/**
 * Agent chat under contention: each case sends its requests truly at once under `npm run
 * test:postgres` (PGlite runs them one statement at a time). A save request is used where a turn
 * must stay in flight: it waits for approval, so the session stays locked however fast the worker is.
 */
let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  await chatTurnsIdle();
  await h.close();
});

const statuses = (results: ApiResponse[]) => results.map((r) => r.status).sort((a, b) => a - b);

async function newSession() {
  const res = await ann.post("/v1/chat/sessions", { scope_type: "user_all_hubs" });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function pendingApproval(sessionId: string) {
  const sent = await ann.post(`/v1/chat/sessions/${sessionId}/messages`, { content: "Remember that the races are run at once.", idempotency_key: "setup" });
  expect(sent.status).toBe(202);
  await chatTurnsIdle();
  const approval = await h.db.chatApproval.findFirstOrThrow({ where: { messageId: sent.body.data.active_message_id } });
  return { messageId: sent.body.data.active_message_id as string, approvalId: approval.id };
}

describe("chat races", () => {
  it("ten different messages sent at once to an idle session: one turn starts, nine are told the session is busy", async () => {
    const id = await newSession();
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => ann.post(`/v1/chat/sessions/${id}/messages`, { content: `Remember that fact ${i} holds.`, idempotency_key: `k${i}` })));
    expect(statuses(results)).toEqual([202, ...Array(9).fill(409)]);
    expect(results.filter((r) => r.status === 409).every((r) => r.body.error.code === "chat_session_locked")).toBe(true);
    await chatTurnsIdle();
    expect(await h.db.chatMessage.count({ where: { sessionId: id } })).toBe(2);
    expect((await h.db.chatSession.findUniqueOrThrow({ where: { id } })).messageCount).toBe(2);
  });

  it("one message retried ten times at once with its idempotency key: one turn, every answer points at it", async () => {
    const id = await newSession();
    const results = await Promise.all(Array.from({ length: 10 }, () => ann.post(`/v1/chat/sessions/${id}/messages`, { content: "Remember that retries are safe.", idempotency_key: "same" })));
    expect(results.every((r) => r.status === 202 || r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.data.active_message_id)).size).toBe(1);
    expect(results.filter((r) => r.body.data.outcome === "fresh")).toHaveLength(1);
    expect(await h.db.chatMessage.count({ where: { sessionId: id } })).toBe(2);
  });

  it("five decisions on one approval at once: one counts, four are told it was decided, one memory is saved", async () => {
    const id = await newSession();
    const { messageId, approvalId } = await pendingApproval(id);
    const results = await Promise.all(Array.from({ length: 5 }, () => ann.post(`/v1/chat/sessions/${id}/approvals/${approvalId}`, { decision: "approve" })));
    expect(statuses(results)).toEqual([200, 409, 409, 409, 409]);
    await chatTurnsIdle();
    expect((await h.db.chatMessage.findUniqueOrThrow({ where: { id: messageId } })).status).toBe("completed");
    expect(await h.db.memory.count({ where: { ownerId: ann.id, content: "the races are run at once." } })).toBe(1);
    expect(await h.db.chatEvent.count({ where: { messageId, type: "approval.decided" } })).toBe(1);
  });

  it("five cancels and an approval at once: at most one cancel registers, and the turn ends once, as it says", async () => {
    const id = await newSession();
    const { messageId, approvalId } = await pendingApproval(id);
    const results = await Promise.all([
      ...Array.from({ length: 5 }, () => ann.post(`/v1/chat/sessions/${id}/messages/${messageId}/cancel`)),
      ann.post(`/v1/chat/sessions/${id}/approvals/${approvalId}`, { decision: "approve" }),
    ]);
    expect(results.every((r) => r.status === 200)).toBe(true);
    const registered = results.slice(0, 5).filter((r) => r.body.data.cancel_registered);
    expect(registered.length).toBeLessThanOrEqual(1);
    await chatTurnsIdle();
    const message = await h.db.chatMessage.findUniqueOrThrow({ where: { id: messageId } });
    // The approval can finish the turn before any cancel reads it; otherwise one cancel stops it.
    expect(message.status).toBe(registered.length ? "canceled" : "completed");
    const events = await h.db.chatEvent.findMany({ where: { messageId }, orderBy: { seq: "asc" } });
    const terminal = events.filter((e) => e.type === "message.completed" || e.type === "message.canceled");
    expect(terminal.map((e) => e.type), JSON.stringify(events.map((e) => [e.seq, e.type]))).toEqual([`message.${message.status}`]);
    expect((await h.db.chatSession.findUniqueOrThrow({ where: { id } })).status).toBe("idle");
  });

  it("five workers handed one turn at once: one runs it, the others skip, its events are written once", async () => {
    const id = await newSession();
    const user = await h.db.chatMessage.create({ data: { id: newId(), sessionId: id, sequence: 1, role: "user", authorUserId: ann.id, status: "completed", content: "What is there?" } });
    const turn = await h.db.chatMessage.create({
      data: { id: newId(), sessionId: id, sequence: 2, role: "assistant", authorUserId: ann.id, status: "queued", parentMessageId: user.id, credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null } },
    });
    await h.db.chatSession.update({ where: { id }, data: { status: "running", activeMessageId: turn.id, messageCount: 2 } });
    const outcomes = await Promise.all(Array.from({ length: 5 }, (_, i) => runChatTurn(h.database, turn.id, `worker-${i}`)));
    expect(outcomes.filter((o) => o === "finished")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "skipped")).toHaveLength(4);
    expect(await h.db.chatEvent.count({ where: { messageId: turn.id, type: "message.tool_call" } })).toBe(1);
    expect(await h.db.chatEvent.count({ where: { messageId: turn.id, type: "message.completed" } })).toBe(1);
  });

  it("a cancel sent as its worker starts a turn: a registered cancel always wins, and the session is free after", async () => {
    for (let round = 0; round < 12; round++) {
      const id = await newSession();
      const user = await h.db.chatMessage.create({
        data: { id: newId(), sessionId: id, sequence: 1, role: "user", authorUserId: ann.id, status: "completed", content: `Remember that race ${round} was run.` },
      });
      const turn = await h.db.chatMessage.create({
        data: { id: newId(), sessionId: id, sequence: 2, role: "assistant", authorUserId: ann.id, status: "queued", parentMessageId: user.id, credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null } },
      });
      await h.db.chatSession.update({ where: { id }, data: { status: "running", activeMessageId: turn.id, messageCount: 2 } });
      // The cancel lands while the worker reads the turn, starts it, or pauses it for the save's approval.
      const [, cancel] = await Promise.all([
        runChatTurn(h.database, turn.id, `racer-${round}`),
        new Promise((resolve) => setTimeout(resolve, round % 4)).then(() => ann.post(`/v1/chat/sessions/${id}/messages/${turn.id}/cancel`)),
      ]);
      expect(cancel.status).toBe(200);
      await chatTurnsIdle();
      const message = await h.db.chatMessage.findUniqueOrThrow({ where: { id: turn.id } });
      if (cancel.body.data.cancel_registered) expect(message.status, `round ${round}`).toBe("canceled");
      expect((await h.db.chatSession.findUniqueOrThrow({ where: { id } })).status, `round ${round}`).not.toBe("canceling");
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatTurnsIdle } from "@/lib/chat/chat-turn-runner.ts";
import { runChatTurn } from "@/lib/chat/run-chat-turn.ts";
import { newId } from "@/lib/ids.ts";
import pg from "pg";
import { hubMembersLockKey } from "@/lib/hubs/hub-access.ts";
import { createHarness, testPostgres, waitProcessed, type ApiResponse, type Client, type Harness } from "./support/harness.ts";
import { chatSessionLockKey } from "@/lib/chat/chat-fields.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";

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

describe("a chat save's lock order", () => {
  /**
   * An account-data deletion locks its chats' message rows (the sessions' cascade) and then the
   * server-wide events lock. A chat save took them the other way round: memory.created's event (the
   * events lock) and then the message's row for its lease and record, so the two could deadlock. Here a
   * second connection holds the message's row, as the deletion would, while the save is under way:
   * the events lock must then still be free (the save waits for the row before taking it).
   */
  it.skipIf(!testPostgres())("takes the message's row before the events lock", async () => {
    const team = await h.teamHub(ann, []);
    const created = await ann.post("/v1/chat/sessions", { scope_type: "user_all_hubs", write_hub_id: team });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.id as string;
    const { messageId, approvalId } = await pendingApproval(id);
    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const waitFor = async (what: string, sql: string) => {
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query(sql);
        if (rows[0].n > 0) return;
        if (waited > 20_000) throw new Error(`the save never waited for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const blockedBySide = "NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))";
    let eventsFree: boolean;
    try {
      // The save stops at the hub's membership lock, before its transaction touches anything else.
      await side.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [hubMembersLockKey(team)]);
      expect((await ann.post(`/v1/chat/sessions/${id}/approvals/${approvalId}`, { decision: "approve" })).status).toBe(200);
      await waitFor("the membership lock", `SELECT count(*)::int AS n FROM pg_locks l WHERE ${blockedBySide} AND l.locktype = 'advisory'`);
      await side.query("BEGIN");
      await side.query("SELECT 1 FROM chat_messages WHERE id = $1 FOR UPDATE", [messageId]);
      await side.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [hubMembersLockKey(team)]);
      // The save's transaction (it holds its advisory locks) now waits for the message's row.
      await waitFor(
        "the message's row",
        `SELECT count(*)::int AS n FROM pg_locks l WHERE ${blockedBySide} AND EXISTS (SELECT 1 FROM pg_locks g WHERE g.pid = l.pid AND g.granted AND g.locktype = 'advisory')`,
      );
      // lib/events/emit-event.ts's EVENTS_LOCK.
      eventsFree = (await side.query("SELECT pg_try_advisory_xact_lock(x'656e6772'::bigint) AS ok")).rows[0].ok as boolean;
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(eventsFree).toBe(true);
    await chatTurnsIdle();
    expect((await h.db.chatMessage.findUniqueOrThrow({ where: { id: messageId } })).status).toBe("completed");
    expect(await h.db.memory.count({ where: { hubId: team, content: "the races are run at once." } })).toBe(1);
  });
});

describe("a memory hard-deleted while a turn that recalled it runs", () => {
  /**
   * A raw DELETE on a second connection stands in for the delete (its own scrub, drop-memory-copies.ts,
   * finds nothing of the turn stored when it runs): what the turn writes while the delete is open must
   * not carry the memory's title or passage once the delete commits.
   */
  beforeAll(() => startBackgroundProcessing());
  afterAll(() => stopBackgroundProcessing());

  async function recallingTurn(title: string) {
    const hub = await h.teamHub(ann, []);
    const pushed = await ann.post("/v1/memories", { content: `# ${title}\nThe ${title.toLowerCase()} rotates on the first Monday of each month.` }, { headers: { "x-hub-id": hub } });
    expect(pushed.status, pushed.text).toBe(201);
    await waitProcessed(h.db, ann, pushed.body.data.id);
    const created = await ann.post("/v1/chat/sessions", { scope_type: "single_hub", scope_hub_ids: [hub] });
    expect(created.status, created.text).toBe(201);
    const sessionId = created.body.data.id as string;
    // Queued by hand, so it runs only when the test says (runChatTurn), not as soon as it is sent.
    const question = await h.db.chatMessage.create({ data: { id: newId(), sessionId, sequence: 1, role: "user", authorUserId: ann.id, status: "completed", content: `When does the ${title.toLowerCase()} rotate?` } });
    const turn = await h.db.chatMessage.create({
      data: { id: newId(), sessionId, sequence: 2, role: "assistant", authorUserId: ann.id, status: "queued", parentMessageId: question.id, credential: { type: "api_key", scopes: ["read", "write"], hub_ids: null } },
    });
    await h.db.chatSession.update({ where: { id: sessionId }, data: { status: "running", activeMessageId: turn.id } });
    return { memoryId: pushed.body.data.id as string, sessionId, messageId: turn.id };
  }

  async function stored(messageId: string) {
    const row = await h.db.chatMessage.findUniqueOrThrow({ where: { id: messageId } });
    const events = await h.db.chatEvent.findMany({ where: { messageId }, orderBy: { seq: "asc" } });
    // What quotes the memories (the answer's own text stays: it is the owner's conversation).
    const quoted = events.map((e) => {
      const data = e.data as { result?: unknown; message?: { tool_calls?: unknown; citations?: unknown } };
      return [data.result, data.message?.tool_calls, data.message?.citations];
    });
    return { row, text: JSON.stringify([row.toolCalls, row.citations, quoted]) };
  }

  async function blockedBy(side: pg.Client, pid: number, ms: number): Promise<boolean> {
    for (let waited = 0; waited <= ms; waited += 20) {
      const { rows } = await side.query("SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND $1 = ANY(pg_blocking_pids(l.pid))", [pid]);
      if (rows[0].n > 0) return true;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return false;
  }

  it.skipIf(!testPostgres())("a delete that commits while the recall's result is being stored leaves no title or passage readable meanwhile", async () => {
    const { memoryId, messageId } = await recallingTurn("Vault code");
    const deleter = new pg.Client({ connectionString: h.url! });
    const watcher = new pg.Client({ connectionString: h.url! });
    await deleter.connect();
    await watcher.connect();
    try {
      const pid = (await deleter.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      await deleter.query("BEGIN");
      await deleter.query("DELETE FROM memories WHERE id = $1", [memoryId]);
      const run = runChatTurn(h.database, messageId);
      // The turn has read the memory (the delete is not committed) and now waits for it somewhere.
      expect(await blockedBy(watcher, pid, 20_000)).toBe(true);
      // Whatever it stored meanwhile is readable (GET messages, the stream's replay): none of the memory.
      const meanwhile = await stored(messageId);
      expect(meanwhile.text).not.toMatch(/Vault code|first Monday/);
      await deleter.query("COMMIT");
      expect(await run).toBe("finished");
      const after = await stored(messageId);
      expect(after.row.status).toBe("completed");
      expect(after.text).not.toMatch(/Vault code|first Monday/);
      expect(after.text).toMatch(/\(deleted\)/);
    } finally {
      await deleter.query("ROLLBACK").catch(() => {});
      await deleter.end();
      await watcher.end();
    }
  });

  it.skipIf(!testPostgres())("a delete that commits while the turn ends: the end waits for it and scrubs what it wrote", async () => {
    const { memoryId, sessionId, messageId } = await recallingTurn("Safe combination");
    const holder = new pg.Client({ connectionString: h.url! });
    const deleter = new pg.Client({ connectionString: h.url! });
    await holder.connect();
    await deleter.connect();
    try {
      const holderPid = (await holder.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const deleterPid = (await deleter.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      // The session's lock is the end's first step (finish): holding it stops the turn right there.
      await holder.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [chatSessionLockKey(sessionId)]);
      const run = runChatTurn(h.database, messageId);
      expect(await blockedBy(deleter, holderPid, 20_000)).toBe(true);
      expect((await stored(messageId)).text).toMatch(/Safe combination/);
      await deleter.query("BEGIN");
      await deleter.query("DELETE FROM memories WHERE id = $1", [memoryId]);
      await holder.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [chatSessionLockKey(sessionId)]);
      // The end reads the memory still there (the delete is not committed); held, it waits for the delete.
      await blockedBy(holder, deleterPid, 2_000);
      await deleter.query("COMMIT");
      expect(await run).toBe("finished");
      const after = await stored(messageId);
      expect(after.row.status).toBe("completed");
      expect(after.text).not.toMatch(/Safe combination|first Monday/);
      expect(after.text).toMatch(/\(deleted\)/);
    } finally {
      await deleter.query("ROLLBACK").catch(() => {});
      await holder.end();
      await deleter.end();
    }
  });

  it.skipIf(!testPostgres())("a move to a hub the owner cannot read that commits while the turn ends: the end waits for it and shows the memory moved", async () => {
    const { memoryId, sessionId, messageId } = await recallingTurn("Board minutes");
    const elsewhere = await h.teamHub(await h.user("Zed"), []);
    const holder = new pg.Client({ connectionString: h.url! });
    const mover = new pg.Client({ connectionString: h.url! });
    await holder.connect();
    await mover.connect();
    try {
      const holderPid = (await holder.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      const moverPid = (await mover.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      await holder.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", [chatSessionLockKey(sessionId)]);
      const run = runChatTurn(h.database, messageId);
      expect(await blockedBy(mover, holderPid, 20_000)).toBe(true);
      // The move as batch-move-memories.ts makes it: the row locked FOR UPDATE first (lockMemoryRows),
      // then moved (its own scrub, drop-memory-copies.ts, ran on what was stored before the end writes).
      await mover.query("BEGIN");
      await mover.query("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE", [memoryId]);
      await mover.query("UPDATE memories SET hub_id = $2 WHERE id = $1", [memoryId, elsewhere]);
      await holder.query("SELECT pg_advisory_unlock(hashtextextended($1, 0))", [chatSessionLockKey(sessionId)]);
      await blockedBy(holder, moverPid, 2_000);
      await mover.query("COMMIT");
      expect(await run).toBe("finished");
      const after = await stored(messageId);
      expect(after.row.status).toBe("completed");
      expect(after.text).not.toMatch(/Board minutes|first Monday/);
      expect(after.text).toMatch(/\(moved\)/);
    } finally {
      await mover.query("ROLLBACK").catch(() => {});
      await holder.end();
      await mover.end();
    }
  });
});

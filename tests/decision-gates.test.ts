import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requestDecision } from "@/lib/boards/request-decision.ts";
import { resolveDecisionGate } from "@/lib/boards/resolve-board-slot.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Decision gates (Memax's `boards.requestDecision`, its CLI's MCP tool memax_request_decision): an
// agent asks, the person answers on the board or in the bell, and the answer becomes a memory.

let h: Harness;
let ann: Client;
let vic: Client;
let eve: Client;
let hub: string;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  vic = await h.user("Vic");
  eve = await h.user("Eve");
  hub = await h.teamHub(ann, [[vic, "viewer"]]);
});
afterAll(async () => {
  await h?.close();
});

async function ask(who: Client, hubId: string, body: Record<string, unknown> = {}) {
  return who.post(`/v1/hubs/${hubId}/board/decision-gate`, { question: "Which database for the new billing service?", options: ["PostgreSQL", "SQLite"], ...body });
}

async function pendingGateRows(who: Client) {
  const rows = (await who.get("/v1/notifications?status=pending&limit=100")).body.data.notifications as { id: string; kind: string; payload: any }[];
  return rows.filter((n) => n.kind === "decision_gate");
}

const resolve = (who: Client, hubId: string, slotKey: string, body: Record<string, unknown>) =>
  who.post(`/v1/hubs/${hubId}/board/slots/${encodeURIComponent(slotKey)}/resolve`, body);

describe("asking", () => {
  it("puts a card on the board and a pending decision in the asker's notifications", async () => {
    const res = await ask(ann, hub, { context: "Billing needs transactions across accounts.", source_agent: "claude-code" });
    expect(res.status, res.text).toBe(201);
    const slot = res.body.data.slot;
    expect(slot).toMatchObject({
      board_id: hub,
      slot_key: `decision:${slot.id}`,
      kind: "decision_gate",
      title: "Which database for the new billing service?",
      state: "fresh",
      cite_memory_ids: [],
      payload: {
        question: "Which database for the new billing service?",
        options: [
          { id: "1", label: "PostgreSQL" },
          { id: "2", label: "SQLite" },
        ],
        context: "Billing needs transactions across accounts.",
        source_agent: "claude-code",
        requested_by: ann.id,
      },
    });
    const board = await vic.get(`/v1/hubs/${hub}/board`);
    expect(board.status).toBe(200);
    expect(board.body.data.board).toMatchObject({ id: hub, hub_id: hub, kind: "system", status: "active" });
    expect(board.body.data.slots.map((s: { slot_key: string }) => s.slot_key)).toContain(slot.slot_key);
    const rows = await pendingGateRows(ann);
    expect(rows.find((n) => n.payload.gate.id === slot.id)?.payload).toMatchObject({ hub: { id: hub }, gate: { question: slot.title, options: slot.payload.options, source_agent: "claude-code" } });
    expect(await pendingGateRows(vic)).toEqual([]);
    await resolve(ann, hub, slot.slot_key, { action: "dismiss" });
  });

  it("asks as the key's agent, whatever the body says", async () => {
    const agentKey = (await ann.post("/v1/auth/api-keys", { name: "cursor", agent_name: "cursor" })).body.data.key;
    const res = await h.anonymous.post(`/v1/hubs/${hub}/board/decision-gate`, { question: "Tabs or spaces?", options: ["tabs", "spaces"], source_agent: "someone-else" }, { headers: { authorization: `Bearer ${agentKey}` } });
    expect(res.body.data.slot.payload.source_agent).toBe("cursor");
    await resolve(ann, hub, res.body.data.slot.slot_key, { action: "dismiss" });
  });

  it("refuses bad questions with 400s, and viewers and outsiders as for pushes", async () => {
    for (const body of [{ options: ["only one"] }, { options: ["a", "b", "c", "d", "e"] }, { options: ["Same", "same"] }, { question: "  " }, { options: ["a", ""] }]) {
      const res = await ask(ann, hub, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe("invalid_request");
    }
    expect((await ask(vic, hub)).status).toBe(403);
    expect((await ask(eve, hub)).status).toBe(404);
    expect((await eve.get(`/v1/hubs/${hub}/board`)).status).toBe(404);
  });

  it("holds at most 3 open gates per hub (409 gate_limit), also when asked at once; settling one frees a place", async () => {
    const fresh = await h.teamHub(ann);
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => ask(ann, fresh, { question: `Question ${i}?` })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    const refused = results.filter((r) => r.status === 409);
    expect(refused).toHaveLength(3);
    expect(refused[0]!.body.error).toMatchObject({ code: "gate_limit", details: { limit: 3 } });
    const first = results.find((r) => r.status === 201)!.body.data.slot;
    expect((await resolve(ann, fresh, first.slot_key, { action: "dismiss" })).body.data.slot.state).toBe("dismissed");
    expect((await ask(ann, fresh, { question: "One more?" })).status).toBe(201);
    // Reopening counts as asking: with three open, the dismissed one stays settled.
    const reopen = await resolve(ann, fresh, first.slot_key, { action: "reopen" });
    expect([reopen.status, reopen.body.error?.code, reopen.body.error?.details?.limit]).toEqual([409, "gate_limit", 3]);
    expect((await ann.get(`/v1/hubs/${fresh}/board`)).body.data.slots.filter((s: { state: string }) => s.state === "seen" || s.state === "fresh")).toHaveLength(3);
    // A reopen of a gate still open changes nothing and is no 409.
    const open = (await ann.get(`/v1/hubs/${fresh}/board`)).body.data.slots.find((s: { state: string }) => s.state === "fresh");
    expect((await resolve(ann, fresh, open.slot_key, { action: "reopen" })).status).toBe(200);
  });
});

describe("asking while the asker's role changes", () => {
  it("a member demoted to viewer (or removed) between the role check and the write asks nothing: 403 (404), no gate, no notification", async () => {
    const con = await h.user("Con");
    const team = await h.teamHub(ann, [[con, "contributor"]]);
    // The role is read (and allows it) first; the change commits as the write's transaction begins — as
    // another request's demotion or removal would between the two.
    const callerAs = (change: () => Promise<unknown>) => sessionContext(h, con, changedBefore(h.db, ["$transaction"], change));
    const member = { hubId_userId: { hubId: team, userId: con.id } };
    const body = { question: "Which queue for the mailer?", options: ["Redis", "PostgreSQL"] };
    await expect(requestDecision(callerAs(() => h.db.hubMember.update({ where: member, data: { role: "viewer" } })), team, body)).rejects.toMatchObject({ code: "forbidden" });
    await h.db.hubMember.update({ where: member, data: { role: "contributor" } });
    await expect(requestDecision(callerAs(() => h.db.hubMember.delete({ where: member })), team, body)).rejects.toMatchObject({ code: "not_found" });
    expect(await h.db.decisionGate.count({ where: { hubId: team } })).toBe(0);
    expect(await h.db.notification.count({ where: { userId: con.id, kind: "decision_gate" } })).toBe(0);
  });
});

describe("answering", () => {
  it("on the board: the choice becomes a memory the agent can find, and the bell's row closes", async () => {
    const slot = (await ask(ann, hub, { context: "Needs joins." })).body.data.slot;
    const res = await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "postgresql" });
    expect(res.status, res.text).toBe(200);
    const answered = res.body.data.slot;
    expect(answered).toMatchObject({ state: "resolved", payload: { chosen: { id: "1", label: "PostgreSQL" } }, resolution: { action: "choose", resolved_by: ann.id } });
    expect(answered.cite_memory_ids).toHaveLength(1);
    const memory = (await ann.get(`/v1/memories/${answered.cite_memory_ids[0]}`)).body.data;
    expect(memory).toMatchObject({ hub_id: hub, title: "Decision: Which database for the new billing service?", tags: ["decision"], source: "decision", kind: "rationale" });
    expect(memory.content).toContain("Chosen: **PostgreSQL**");
    expect(memory.content).toContain("Context: Needs joins.");
    // Asked with no agent named: by the person.
    expect(memory.content).toMatch(/Asked by Ann on \d{4}-\d{2}-\d{2}; answered by Ann on/);
    const found = await ann.get(`/v1/memories/search?q=billing%20database%20decision&hub_id=${hub}`);
    expect(found.body.data.map((r: { memory_id: string }) => r.memory_id)).toContain(memory.id);
    expect((await pendingGateRows(ann)).map((n) => n.payload.gate.id)).not.toContain(slot.id);
    // Settled: another answer changes nothing and says what stands.
    const again = await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "2" });
    expect(again.status).toBe(200);
    expect(again.body.data.slot.payload.chosen).toEqual({ id: "1", label: "PostgreSQL" });

    // Reopened: back on the board and in the bell; a new answer updates the same memory.
    const reopened = await resolve(ann, hub, slot.slot_key, { action: "reopen" });
    expect(reopened.body.data.slot).toMatchObject({ state: "seen" });
    expect(reopened.body.data.slot).not.toHaveProperty("resolution");
    expect((await pendingGateRows(ann)).map((n) => n.payload.gate.id)).toContain(slot.id);
    const changed = await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "2" });
    expect(changed.body.data.slot.cite_memory_ids).toEqual([memory.id]);
    const updated = (await ann.get(`/v1/memories/${memory.id}`)).body.data;
    expect(updated.version).toBe(2);
    expect(updated.content).toContain("Chosen: **SQLite**");
  });

  it("a reopened gate is answered by any member who may write, not only by who answered first", async () => {
    const cat = await h.user("Cat");
    const dan = await h.user("Dan");
    const team = await h.teamHub(ann, [[cat, "contributor"], [dan, "contributor"]]);
    const slot = (await ask(ann, team, { question: "Release train?", options: ["weekly", "daily"] })).body.data.slot;
    const first = await resolve(cat, team, slot.slot_key, { action: "choose", choice: "weekly" });
    expect(first.status, first.text).toBe(200);
    const [record] = first.body.data.slot.cite_memory_ids;
    expect((await resolve(ann, team, slot.slot_key, { action: "reopen" })).status).toBe(200);
    const second = await resolve(dan, team, slot.slot_key, { action: "choose", choice: "daily" });
    expect(second.status, second.text).toBe(200);
    expect(second.body.data.slot).toMatchObject({ state: "resolved", payload: { chosen: { label: "daily" } }, cite_memory_ids: [record] });
    const memory = (await dan.get(`/v1/memories/${record}`)).body.data;
    expect(memory.content).toContain("Chosen: **daily**");
    expect(memory.content).toContain("answered by Dan");
    expect(await h.db.memory.count({ where: { hubId: team, sourcePath: `decision-gates/${slot.id}` } })).toBe(1);

    // From the bell too; and if the answer cannot be written, the record stays with who had it.
    expect((await resolve(ann, team, slot.slot_key, { action: "reopen" })).status).toBe(200);
    // The record counts against its new owner's quota; and the longer answer does not fit the hub.
    expect((await cat.post("/v1/memories", { content: "Cat's own note." })).status).toBe(201);
    for (const [name, value] of [
      ["ENGRAM_QUOTA_USER_MEMORIES", String(await h.db.memory.count({ where: { ownerId: cat.id } }))],
      ["ENGRAM_QUOTA_HUB_BYTES", String((await h.db.storageUsage.findFirstOrThrow({ where: { scope: "hub", scopeId: team } })).bytes)],
    ] as const) {
      process.env[name] = value;
      try {
        const full = await resolve(cat, team, slot.slot_key, { action: "choose", choice: "weekly" });
        expect([name, full.status, full.body.error?.code]).toEqual([name, 413, "quota_exceeded"]);
      } finally {
        delete process.env[name];
      }
      expect((await h.db.memory.findUniqueOrThrow({ where: { id: record } })).ownerId).toBe(dan.id);
      expect((await h.db.decisionGate.findUniqueOrThrow({ where: { id: slot.id } })).state).toBe("seen");
    }
    const row = (await pendingGateRows(ann)).find((n) => n.payload.gate.id === slot.id)!;
    expect((await ann.post(`/v1/notifications/${row.id}/resolve`, { action: "1" })).status).toBe(200);
    expect((await ann.get(`/v1/memories/${record}`)).body.data.content).toContain("Chosen: **weekly**");
  });

  it("a choice racing a reopen and another answer of its gate never writes over that answer", async () => {
    const cat = await h.user("Cat");
    const team = await h.teamHub(ann, [[cat, "contributor"]]);
    const slot = (await ask(ann, team, { question: "Which CI?", options: ["GitHub Actions", "Buildkite"] })).body.data.slot;
    // Ann's choice is on its way to write its memory when Cat reopens the gate and answers the other
    // option (as two people on the board at once would).
    const otherAnswer = async () => {
      expect((await resolve(cat, team, slot.slot_key, { action: "reopen" })).status).toBe(200);
      expect((await resolve(cat, team, slot.slot_key, { action: "choose", choice: "Buildkite" })).body.data.slot.payload.chosen.label).toBe("Buildkite");
    };
    const late = await resolveDecisionGate(sessionContext(h, ann, changedBefore(h.db, ["user.findUnique"], otherAnswer)), team, slot.slot_key, { action: "choose", choice: "1" });
    expect(late.slot).toMatchObject({ state: "resolved", payload: { chosen: { label: "Buildkite" } }, resolution: { resolved_by: cat.id } });
    const [record] = late.slot.cite_memory_ids;
    const memory = (await ann.get(`/v1/memories/${record}`)).body.data;
    expect(memory.content).toContain("Chosen: **Buildkite**");
    expect(memory.content).toContain("answered by Cat");
    expect(await h.db.memory.count({ where: { hubId: team, sourcePath: `decision-gates/${slot.id}` } })).toBe(1);
  });

  it("an answer's record is set with its memory: a reopen and a contributor's answer right after find it, and take it over", async () => {
    const cat = await h.user("Cat");
    const team = await h.teamHub(ann, [[cat, "contributor"]]);
    const slot = (await ask(ann, team, { question: "Which queue?", options: ["SQS", "Kafka"] })).body.data.slot;
    // As soon as Ann's answer is committed (before anything else her request does), the gate is
    // reopened and Cat answers it.
    let late: Awaited<ReturnType<typeof resolve>> | undefined;
    const otherAnswer = async () => {
      expect((await resolve(ann, team, slot.slot_key, { action: "reopen" })).status).toBe(200);
      late = await resolve(cat, team, slot.slot_key, { action: "choose", choice: "Kafka" });
    };
    const db = changedBefore(h.db, ["decisionGate.update", "decisionGate.findUnique"], otherAnswer);
    await resolveDecisionGate(sessionContext(h, ann, db), team, slot.slot_key, { action: "choose", choice: "1" });
    expect(late?.status, late?.text).toBe(200);
    const gate = await h.db.decisionGate.findUniqueOrThrow({ where: { id: slot.id } });
    expect(gate).toMatchObject({ state: "resolved", choice: 1, resolvedBy: cat.id });
    const record = await h.db.memory.findUniqueOrThrow({ where: { id: gate.memoryId! } });
    expect(record).toMatchObject({ ownerId: cat.id, sourcePath: `decision-gates/${slot.id}` });
    expect(record.content).toContain("Chosen: **Kafka**");
  });

  it("a gate deleted right after its answer committed: the answer is still 200", async () => {
    const team = await h.teamHub(ann, []);
    const slot = (await ask(ann, team, { question: "Which cache?", options: ["Redis", "Memcached"] })).body.data.slot;
    const gone = () => h.db.decisionGate.delete({ where: { id: slot.id } });
    const db = changedBefore(h.db, ["decisionGate.update", "decisionGate.findUnique"], gone);
    const answered = await resolveDecisionGate(sessionContext(h, ann, db), team, slot.slot_key, { action: "choose", choice: "1" });
    expect(answered.slot).toMatchObject({ state: "resolved" });
  });

  it("choices, reopens and dismissals at once: the card and its memory always tell the same answer", async () => {
    const cat = await h.user("Cat");
    const team = await h.teamHub(ann, [[cat, "contributor"]]);
    const slot = (await ask(ann, team, { question: "Which region?", options: ["eu-west", "us-east", "ap-south"] })).body.data.slot;
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all([
        resolve(ann, team, slot.slot_key, { action: "choose", choice: "1" }),
        resolve(cat, team, slot.slot_key, { action: "choose", choice: "2" }),
        resolve(cat, team, slot.slot_key, { action: "reopen" }),
        resolve(ann, team, slot.slot_key, { action: "choose", choice: "3" }),
      ]);
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      const gate = await h.db.decisionGate.findUniqueOrThrow({ where: { id: slot.id } });
      if (gate.state === "resolved") {
        const record = await h.db.memory.findUniqueOrThrow({ where: { id: gate.memoryId! } });
        expect(record.content).toContain(`Chosen: **${gate.options[gate.choice!]}**`);
      }
      await resolve(ann, team, slot.slot_key, { action: "reopen" });
    }
    expect(await h.db.memory.count({ where: { hubId: team, sourcePath: `decision-gates/${slot.id}` } })).toBe(1);
  });

  it("a choice that cannot be written never frees its gate's place: a question asked meanwhile is over the limit", async () => {
    const team = await h.teamHub(ann);
    expect((await ann.post("/v1/memories", { content: "The one memory this hub has room for." }, { headers: { "x-hub-id": team } })).status).toBe(201);
    const slots = [];
    for (let i = 0; i < 3; i++) slots.push((await ask(ann, team, { question: `Full board ${i}?` })).body.data.slot);
    // The hub is full, so the answer's memory will be refused; a fourth question arrives while it is written.
    let fourth: { status: number; body: any } | undefined;
    const askMeanwhile = async () => {
      fourth = await ask(ann, team, { question: "A fourth one?" });
    };
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = String(await h.db.memory.count({ where: { hubId: team } }));
    try {
      const choosing = resolveDecisionGate(sessionContext(h, ann, changedBefore(h.db, ["user.findUnique"], askMeanwhile)), team, slots[0].slot_key, { action: "choose", choice: "1" });
      await expect(choosing).rejects.toMatchObject({ code: "quota_exceeded" });
    } finally {
      delete process.env.ENGRAM_QUOTA_HUB_MEMORIES;
    }
    expect([fourth?.status, fourth?.body.error?.code]).toEqual([409, "gate_limit"]);
    expect(await h.db.decisionGate.count({ where: { hubId: team, state: { in: ["fresh", "seen"] } } })).toBe(3);
  });

  it("a gate's answer path is reserved: no push can take it before the gate is answered", async () => {
    const cat = await h.user("Cat");
    const dan = await h.user("Dan");
    const team = await h.teamHub(ann, [[cat, "contributor"], [dan, "contributor"]]);
    const slot = (await ask(ann, team, { question: "Feature flags?", options: ["LaunchDarkly", "our own"] })).body.data.slot;
    const path = `decision-gates/${slot.id}`;
    const squat = await cat.post("/v1/memories", { content: "Cat's memory, where the answer goes.", source_path: path });
    expect([squat.status, squat.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(squat.body.error.message).toContain('"decision-gates/"');
    expect((await ann.post("/v1/memories", { content: "Even a manager's push.", source_path: "decision-gates/anything" })).status).toBe(400);
    const answered = await resolve(dan, team, slot.slot_key, { action: "choose", choice: "our own" });
    expect(answered.status, answered.text).toBe(200);
    const record = await h.db.memory.findFirstOrThrow({ where: { hubId: team, sourcePath: path } });
    expect({ id: record.id, ownerId: record.ownerId, source: record.source }).toEqual({ id: answered.body.data.slot.cite_memory_ids[0], ownerId: dan.id, source: "decision" });
  });

  it("from the bell: an option's id answers it, anything else is refused with the actions", async () => {
    const slot = (await ask(ann, hub, { question: "Deploy window?", options: ["Tuesday", "Thursday", "Never"] })).body.data.slot;
    const row = (await pendingGateRows(ann)).find((n) => n.payload.gate.id === slot.id)!;
    const wrong = await ann.post(`/v1/notifications/${row.id}/resolve`, { action: "accept" });
    expect(wrong.status).toBe(400);
    expect(wrong.body.error).toMatchObject({ code: "invalid_action_for_notification_kind", details: { actions: ["1", "2", "3", "dismiss"] } });
    expect((await ann.post(`/v1/notifications/${row.id}/dismiss`)).body.error.code).toBe("dismiss_not_applicable_to_decision");
    const done = await ann.post(`/v1/notifications/${row.id}/resolve`, { action: "2" });
    expect(done.body.data).toEqual({ status: "resolved", action: "2", resolution: "chose_2" });
    const board = (await ann.get(`/v1/hubs/${hub}/board`)).body.data.slots.find((s: { id: string }) => s.id === slot.id);
    expect(board).toMatchObject({ state: "resolved", payload: { chosen: { label: "Thursday" } } });
    expect((await ann.post(`/v1/notifications/${row.id}/resolve`, { action: "1" })).status).toBe(409);
  });

  it("answered on the board first, the bell's answer is a 409 that says what stands", async () => {
    const slot = (await ask(ann, hub, { question: "Cache TTL?", options: ["5 minutes", "1 hour"] })).body.data.slot;
    const row = (await pendingGateRows(ann)).find((n) => n.payload.gate.id === slot.id)!;
    await resolve(ann, hub, slot.slot_key, { action: "reopen" });
    expect((await resolve(ann, hub, slot.slot_key, { action: "dismiss" })).body.data.slot.state).toBe("dismissed");
    const late = await ann.post(`/v1/notifications/${row.id}/resolve`, { action: "1" });
    expect(late.status).toBe(409);
  });

  it("keeps the gate open when the answer cannot be written (a full quota), and refuses the wrong actions", async () => {
    const slot = (await ask(ann, hub, { question: "Quota test?", options: ["a", "b"] })).body.data.slot;
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = String(await h.db.memory.count({ where: { hubId: hub } }));
    try {
      const full = await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "a" });
      expect(full.status).toBe(413);
      expect(full.body.error.code).toBe("quota_exceeded");
    } finally {
      delete process.env.ENGRAM_QUOTA_HUB_MEMORIES;
    }
    const board = (await ann.get(`/v1/hubs/${hub}/board`)).body.data.slots.find((s: { id: string }) => s.id === slot.id);
    expect(board).toMatchObject({ state: "fresh", cite_memory_ids: [] });
    expect((await pendingGateRows(ann)).map((n) => n.payload.gate.id)).toContain(slot.id);
    expect((await resolve(ann, hub, slot.slot_key, { action: "ack" })).status).toBe(400);
    expect((await resolve(ann, hub, slot.slot_key, { action: "choose" })).body.error.code).toBe("invalid_request");
    expect((await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "c" })).body.error).toMatchObject({ code: "invalid_request", details: { options: slot.payload.options } });
    expect((await resolve(vic, hub, slot.slot_key, { action: "dismiss" })).status).toBe(403);
    expect((await resolve(eve, hub, slot.slot_key, { action: "dismiss" })).status).toBe(404);
    expect((await resolve(ann, hub, "decision:not-an-id", { action: "dismiss" })).status).toBe(404);
    // Another hub's card is not on this board.
    const other = await h.teamHub(ann);
    expect((await resolve(ann, other, slot.slot_key, { action: "dismiss" })).status).toBe(404);
    expect((await resolve(ann, hub, slot.slot_key, { action: "choose", choice: "b" })).body.data.slot.state).toBe("resolved");
  });

  it("the hub's one board is listed and readable by its id; a gate's slot has no earlier versions", async () => {
    const gate = await ask(ann, hub, { question: "Which queue for the mailer?", options: ["SQS", "Redis"] });
    const slotKey = gate.body.data.slot.slot_key;
    const boards = await vic.get(`/v1/hubs/${hub}/boards`);
    expect(boards.status).toBe(200);
    expect(boards.body.data.boards).toEqual([expect.objectContaining({ id: hub, hub_id: hub, kind: "system", status: "active" })]);
    const byId = await vic.get(`/v1/hubs/${hub}/boards/${hub}`);
    expect(byId.body.data).toEqual((await vic.get(`/v1/hubs/${hub}/board`)).body.data);
    expect(byId.body.data.slots.map((s: { slot_key: string }) => s.slot_key)).toContain(slotKey);
    expect((await vic.get(`/v1/hubs/${hub}/boards/${vic.personalHubId}`)).status).toBe(404);
    expect((await eve.get(`/v1/hubs/${hub}/boards`)).status).toBe(404);
    expect((await vic.get(`/v1/hubs/${hub}/board/slots/${encodeURIComponent(slotKey)}/history`)).body.data).toEqual({ versions: [] });
    expect((await vic.get(`/v1/hubs/${hub}/board/slots/decision%3A${hub}/history`)).status).toBe(404);
    expect((await eve.get(`/v1/hubs/${hub}/board/slots/${encodeURIComponent(slotKey)}/history`)).status).toBe(404);
    expect((await resolve(ann, hub, slotKey, { action: "dismiss" })).status).toBe(200);
  });

  it("goes with its hub", async () => {
    const doomed = (await ann.post("/v1/hubs", { name: "Doomed" })).body.data.id;
    await ask(ann, doomed);
    expect(await h.db.decisionGate.count({ where: { hubId: doomed } })).toBe(1);
    expect((await ann.delete(`/v1/hubs/${doomed}`)).status).toBe(200);
    expect(await h.db.decisionGate.count({ where: { hubId: doomed } })).toBe(0);
    expect((await pendingGateRows(ann)).some((n) => n.payload.hub.id === doomed)).toBe(false);
  });
});

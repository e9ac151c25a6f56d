import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteBoard } from "@/lib/boards/delete-board.ts";
import { refreshCustomBoard } from "@/lib/boards/refresh-custom-board.ts";
import { COOKING_BOARDS_PER_START, customBoardsIdle, kickBoardsAfterDream, kickCookingBoards } from "@/lib/boards/kick-custom-board.ts";
import { updateBoard } from "@/lib/boards/update-board.ts";
import { runDreamRunOnce } from "@/lib/dreams/dream-runner.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { changedBefore, sessionContext } from "./support/changed-mid-request.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, testPostgres, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";
import { startFakeChat } from "./support/openai-stream-fake.ts";

// Custom boards (Memax's boards.createBoard / updateBoard / deleteBoard): a standing instruction
// answered from the hub's memories on one card, written at once and refreshed by every dream run.

let h: Harness;
let ann: Client;
let cal: Client;
let vic: Client;
let hub: string;

const boards = (hubId: string) => `/v1/hubs/${hubId}/boards`;

async function push(who: Client, content: string) {
  const res = await who.post("/v1/memories", { content }, { headers: { "x-hub-id": hub } });
  expect(res.status).toBe(201);
  return waitProcessed(h.db, who, res.body.data.id);
}

beforeAll(async () => {
  h = await createHarness();
  await startBackgroundProcessing();
  ann = await h.user("Ann");
  cal = await h.user("Cal");
  vic = await h.user("Vic");
  hub = await h.teamHub(ann, [[cal, "contributor"], [vic, "viewer"]]);
  await push(ann, "# Release checklist\nBefore a release the changelog is written and the staging smoke tests must pass.");
});
afterAll(async () => {
  await customBoardsIdle();
  stopBackgroundProcessing();
  await h?.close();
});

describe("custom boards", () => {
  it("creates a board that cooks, then shows its first card answering the instruction", async () => {
    await flushAccess();
    const accessesBefore = (await h.db.memory.findMany({ where: { hubId: hub }, select: { id: true, accessCount: true } })).map((m) => [m.id, m.accessCount]);
    const res = await cal.post(boards(hub), { title: "Release readiness", instruction: "What must happen before a release?" });
    expect(res.status, res.text).toBe(201);
    const board = res.body.data.board;
    expect(board).toMatchObject({ hub_id: hub, created_by: cal.id, kind: "custom", title: "Release readiness", status: "cooking" });
    await customBoardsIdle();
    const got = (await vic.get(`${boards(hub)}/${board.id}`)).body.data;
    expect(got.board.status).toBe("active");
    expect(got.slots).toHaveLength(1);
    expect(got.slots[0]).toMatchObject({ slot_key: `board:${board.id}`, kind: "instruction_answer", state: "fresh", board_id: board.id });
    expect(got.slots[0].payload.answer).toMatch(/staging smoke tests/);
    expect(got.slots[0].cite_memory_ids).toHaveLength(1);
    // Writing the card is no person reading: the memories it cites look no more used than before.
    await flushAccess();
    expect((await h.db.memory.findMany({ where: { hubId: hub }, select: { id: true, accessCount: true } })).map((m) => [m.id, m.accessCount])).toEqual(accessesBefore);
    const list = (await vic.get(boards(hub))).body.data.boards;
    expect(list.map((b: { kind: string }) => b.kind)).toEqual(["system", "custom"]);
    expect((await h.anonymous.get(boards(hub))).status).toBe(401);
  });

  it("a board left cooking with nothing asking it (its kick lost to a restart, or its card emptied by a migration) is asked again at start-up", async () => {
    const board = (await ann.post(boards(hub), { title: "Checklist", instruction: "What must happen before a release?" })).body.data.board;
    await customBoardsIdle();
    // As the delete clean-up migration leaves it: no card, cooking, and no kick in any process.
    await h.db.customBoard.update({ where: { id: board.id }, data: { status: "cooking", cardPayload: Prisma.DbNull, cardCiteMemoryIds: [], cardState: null, cardContentUpdatedAt: null, cardCreatedAt: null, cardAskedAt: null } });
    kickCookingBoards(h.database);
    await customBoardsIdle();
    const got = (await ann.get(`${boards(hub)}/${board.id}`)).body.data;
    expect(got.board.status).toBe("active");
    expect(got.slots[0].payload.answer).toMatch(/staging smoke tests/);
  });

  it("start-up kicks pass over boards of deleted hubs, and boards a kick leaves cooking let the others go first next time", async () => {
    const waiting = (await ann.post(boards(hub), { title: "Waiting", instruction: "What must happen before a release?" })).body.data.board;
    await customBoardsIdle();
    const cooking = { status: "cooking", cardPayload: Prisma.DbNull, cardCiteMemoryIds: [], cardState: null, cardContentUpdatedAt: null, cardCreatedAt: null, cardAskedAt: null };
    await h.db.customBoard.update({ where: { id: waiting.id }, data: { ...cooking, updatedAt: new Date() } });
    const ahead = (hubId: string, createdBy: string) =>
      h.db.customBoard.createMany({
        data: Array.from({ length: COOKING_BOARDS_PER_START }, (_, i) => ({
          id: newId(), hubId, createdBy, title: `Stuck ${i}`, instruction: "Anything?", status: "cooking", updatedAt: new Date(Date.now() - 3_600_000 + i),
        })),
      });
    // Boards of a hub marked deleted (its purge not done yet): older than every other, and asked for nothing.
    const gone = await h.teamHub(ann);
    await ahead(gone, ann.id);
    await h.db.hub.update({ where: { id: gone }, data: { deletedAt: new Date() } });
    kickCookingBoards(h.database);
    await customBoardsIdle();
    expect((await h.db.customBoard.findUniqueOrThrow({ where: { id: waiting.id } })).status).toBe("active");
    await h.db.customBoard.deleteMany({ where: { hubId: gone } });

    // Boards whose creator left the hub: every kick skips them, unchanged.
    await h.db.customBoard.update({ where: { id: waiting.id }, data: { ...cooking, updatedAt: new Date() } });
    const left = await h.user("Lee");
    await ahead(hub, left.id);
    kickCookingBoards(h.database);
    await customBoardsIdle();
    kickCookingBoards(h.database);
    await customBoardsIdle();
    expect((await h.db.customBoard.findUniqueOrThrow({ where: { id: waiting.id } })).status).toBe("active");
    await h.db.customBoard.deleteMany({ where: { createdBy: left.id } });
  });

  it("refreshes the card on a dream run, keeps the old answer as a version, and marks it fresh again", async () => {
    const board = (await ann.post(boards(hub), { title: "Deploys", instruction: "How are deploys rolled back?" })).body.data.board;
    await customBoardsIdle();
    const key = encodeURIComponent(`board:${board.id}`);
    const ack = await ann.post(`/v1/hubs/${hub}/board/slots/${key}/resolve`, { action: "ack" });
    expect(ack.body.data.slot).toMatchObject({ state: "resolved", resolution: { action: "ack", resolved_by: ann.id } });
    expect((await ann.post(`/v1/hubs/${hub}/board/slots/${key}/resolve`, { action: "choose", choice: "1" })).status).toBe(400);
    await push(ann, "# Rollback\nA bad deploy is rolled back with kubectl rollout undo deployment/api.");
    const run = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hub } });
    expect(await runDreamRunOnce(h.db, run.body.data.run_id)).toBe(true);
    await customBoardsIdle();
    const slot = (await ann.get(`${boards(hub)}/${board.id}`)).body.data.slots[0];
    expect(slot).toMatchObject({ state: "fresh", dream_run_id: run.body.data.run_id });
    expect(slot.payload.answer).toMatch(/kubectl rollout undo/);
    const history = (await vic.get(`/v1/hubs/${hub}/board/slots/${key}/history`)).body.data.versions;
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ board_id: board.id, slot_key: `board:${board.id}`, content_produced_at: expect.any(String), archived_at: expect.any(String) });
    expect(history[0].payload.answer).not.toMatch(/kubectl/);
  });

  it("feedback: each member's latest verdict counts, a live card settles with it, a settled one keeps its receipt, and a new answer starts afresh", async () => {
    const board = (await ann.post(boards(hub), { title: "Rollbacks", instruction: "How is a bad deploy rolled back?" })).body.data.board;
    await customBoardsIdle();
    const resolve = (who: Client, body: unknown) => who.post(`/v1/hubs/${hub}/board/slots/${encodeURIComponent(`board:${board.id}`)}/resolve`, body);
    const missing = await resolve(cal, { action: "feedback" });
    expect([missing.status, missing.body.error.code, missing.body.error.details.issues[0].path]).toEqual([400, "invalid_request", "verdict"]);
    expect((await resolve(cal, { action: "feedback", verdict: "maybe" })).status).toBe(400);
    expect((await resolve(vic, { action: "feedback", verdict: "accurate" })).status).toBe(403);

    const first = (await resolve(cal, { action: "feedback", verdict: "accurate" })).body.data.slot;
    expect(first).toMatchObject({ state: "resolved", resolution: { action: "feedback", verdict: "accurate", resolved_by: cal.id } });
    expect(first.feedback).toEqual({ accurate: 1, inaccurate: 0, my_verdict: "accurate" });
    // Settled by Cal: Ann's verdict counts, Cal's receipt stays.
    const second = (await resolve(ann, { action: "feedback", verdict: "inaccurate" })).body.data.slot;
    expect(second).toMatchObject({ state: "resolved", resolution: { action: "feedback", verdict: "accurate", resolved_by: cal.id } });
    expect(second.feedback).toEqual({ accurate: 1, inaccurate: 1, my_verdict: "inaccurate" });
    // Cal changes his mind: his latest verdict wins, and his own receipt shows it.
    const changed = (await resolve(cal, { action: "feedback", verdict: "inaccurate" })).body.data.slot;
    expect(changed).toMatchObject({ resolution: { action: "feedback", verdict: "inaccurate", resolved_by: cal.id } });
    expect(changed.feedback).toEqual({ accurate: 0, inaccurate: 2, my_verdict: "inaccurate" });
    expect((await vic.get(`${boards(hub)}/${board.id}`)).body.data.slots[0].feedback).toEqual({ accurate: 0, inaccurate: 2 });
    // A reopened card takes feedback as a live one again.
    expect((await resolve(ann, { action: "reopen" })).body.data.slot.state).toBe("seen");
    const again = (await resolve(ann, { action: "feedback", verdict: "accurate" })).body.data.slot;
    expect(again).toMatchObject({ state: "resolved", resolution: { action: "feedback", verdict: "accurate", resolved_by: ann.id } });
    expect(again.feedback).toEqual({ accurate: 1, inaccurate: 1, my_verdict: "accurate" });

    // A new answer: the verdicts stay with the old one, in the history.
    await push(ann, "# Rollback drill\nEvery Friday the on-call engineer rehearses rolling back a bad deploy on staging with kubectl rollout undo.");
    const run = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hub } });
    expect(await runDreamRunOnce(h.db, run.body.data.run_id)).toBe(true);
    await customBoardsIdle();
    const slot = (await cal.get(`${boards(hub)}/${board.id}`)).body.data.slots[0];
    expect(slot.state).toBe("fresh");
    expect(slot.resolution).toBeUndefined();
    expect(slot.feedback).toEqual({ accurate: 0, inaccurate: 0 });
    const history = (await cal.get(`/v1/hubs/${hub}/board/slots/${encodeURIComponent(`board:${board.id}`)}/history`)).body.data.versions;
    expect(history[0].feedback).toEqual({ accurate: 1, inaccurate: 1, my_verdict: "inaccurate" });
    // A verdict that names the answer it read is refused once that answer was replaced.
    const stale = await resolve(ann, { action: "feedback", verdict: "accurate", content_updated_at: first.content_updated_at });
    expect([stale.status, stale.body.error.code, stale.body.error.details.content_updated_at]).toEqual([409, "conflict", slot.content_updated_at]);
    const current = await resolve(ann, { action: "feedback", verdict: "accurate", content_updated_at: slot.content_updated_at });
    expect(current.body.data.slot.feedback).toEqual({ accurate: 1, inaccurate: 0, my_verdict: "accurate" });
    expect((await resolve(ann, { action: "feedback", verdict: "accurate", content_updated_at: "yesterday" })).status).toBe(400);

    // A new instruction is a new question: its old verdicts go with its answers.
    expect(await h.db.customBoardFeedback.count({ where: { boardId: board.id } })).toBe(3);
    await ann.patch(`${boards(hub)}/${board.id}`, { instruction: "Who rehearses rollbacks?" });
    expect(await h.db.customBoardFeedback.count({ where: { boardId: board.id } })).toBe(0);
    await customBoardsIdle();
  });

  it("verdicts sent at once: each member counted once, the card settled by one of them", async () => {
    const members = [ann, cal, await h.user("Dee"), await h.user("Eli")];
    const crowd = await h.teamHub(ann, members.slice(1).map((m) => [m, "contributor"] as [Client, "contributor"]));
    await ann.post("/v1/memories", { content: "# Release checklist\nBefore a release the changelog is written." }, { headers: { "x-hub-id": crowd } });
    const board = (await ann.post(boards(crowd), { title: "At once", instruction: "What happens before a release?" })).body.data.board;
    await customBoardsIdle();
    const path = `/v1/hubs/${crowd}/board/slots/${encodeURIComponent(`board:${board.id}`)}/resolve`;
    const sent = await Promise.all(
      members.flatMap((m, i) => [m.post(path, { action: "feedback", verdict: i % 2 ? "inaccurate" : "accurate" }), m.post(path, { action: "feedback", verdict: i % 2 ? "inaccurate" : "accurate" })]),
    );
    expect(sent.map((r) => r.status)).toEqual(Array(8).fill(200));
    const slot = (await ann.get(`${boards(crowd)}/${board.id}`)).body.data.slots[0];
    expect(slot.feedback).toEqual({ accurate: 2, inaccurate: 2, my_verdict: "accurate" });
    expect(slot.state).toBe("resolved");
    expect(members.map((m) => m.id)).toContain(slot.resolution.resolved_by);
    expect(await h.db.customBoardFeedback.count({ where: { boardId: board.id } })).toBe(4);
  });

  it("ack, dismiss and reopen name the answer they read; a card emptied meanwhile is not found; a refresh older than the card's writes nothing", async () => {
    const board = (await ann.post(boards(hub), { title: "Named", instruction: "What must happen before a release?" })).body.data.board;
    await customBoardsIdle();
    const path = `/v1/hubs/${hub}/board/slots/${encodeURIComponent(`board:${board.id}`)}/resolve`;
    const slot = (await ann.get(`${boards(hub)}/${board.id}`)).body.data.slots[0];
    const stale = await ann.post(path, { action: "ack", content_updated_at: new Date(Date.parse(slot.content_updated_at) - 1000).toISOString() });
    expect([stale.status, stale.body.error.code, stale.body.error.details.content_updated_at]).toEqual([409, "conflict", slot.content_updated_at]);
    expect((await ann.post(path, { action: "dismiss", content_updated_at: slot.content_updated_at })).body.data.slot.state).toBe("dismissed");
    // A refresh whose ask began before the one that wrote the card leaves it alone.
    const { refreshCustomBoard } = await import("@/lib/boards/refresh-custom-board.ts");
    await h.db.customBoard.update({ where: { id: board.id }, data: { cardAskedAt: new Date(Date.now() + 60_000) } });
    await push(ann, "# Release freeze\nBefore a release the code freeze starts on Wednesday.");
    expect(await refreshCustomBoard(h.database, board.id)).toBe("skipped");
    expect((await ann.get(`${boards(hub)}/${board.id}`)).body.data.slots[0]).toMatchObject({ state: "dismissed", content_updated_at: slot.content_updated_at });
    await h.db.customBoard.update({ where: { id: board.id }, data: { cardAskedAt: null } });
    expect(await refreshCustomBoard(h.database, board.id)).toBe("written");
    // Asked again with nothing new: the card and the board's updated_at stay as they were.
    const before = (await ann.get(`${boards(hub)}/${board.id}`)).body.data;
    expect(await refreshCustomBoard(h.database, board.id)).toBe("unchanged");
    const after = (await ann.get(`${boards(hub)}/${board.id}`)).body.data;
    expect([after.board.updated_at, after.slots[0].content_updated_at]).toEqual([before.board.updated_at, before.slots[0].content_updated_at]);
    // Emptied by a new instruction: the card is gone, not answered with an empty 200.
    await ann.patch(`${boards(hub)}/${board.id}`, { instruction: "Who freezes the code?", status: "paused" });
    expect((await ann.post(path, { action: "ack" })).status).toBe(404);
    // Two deletes at once: one deletes, the other finds nothing; never a 500.
    const deletes = await Promise.all([ann.delete(`${boards(hub)}/${board.id}`), ann.delete(`${boards(hub)}/${board.id}`)]);
    expect(deletes.map((r) => r.status).sort()).toEqual([200, 404]);
  });

  it("a new instruction empties the card and cooks again; pause stops refreshes; delete removes it", async () => {
    const board = (await ann.post(boards(hub), { title: "Checks", instruction: "What must happen before a release?" })).body.data.board;
    await customBoardsIdle();
    const paused = await ann.patch(`${boards(hub)}/${board.id}`, { status: "paused" });
    expect(paused.body.data.board.status).toBe("paused");
    const rewritten = await ann.patch(`${boards(hub)}/${board.id}`, { instruction: "How are deploys rolled back?" });
    expect(rewritten.body.data.board).toMatchObject({ status: "paused", instruction: "How are deploys rolled back?" });
    await customBoardsIdle();
    expect((await ann.get(`${boards(hub)}/${board.id}`)).body.data.slots).toEqual([]);
    const resumed = await ann.patch(`${boards(hub)}/${board.id}`, { status: "active" });
    expect(resumed.body.data.board.status).toBe("cooking");
    await customBoardsIdle();
    const slot = (await ann.get(`${boards(hub)}/${board.id}`)).body.data.slots[0];
    expect(slot.payload.answer).toMatch(/kubectl/);
    expect((await ann.patch(`${boards(hub)}/${board.id}`, { status: "cooking" })).status).toBe(400);
    expect((await ann.delete(`${boards(hub)}/${board.id}`)).body.data).toEqual({ deleted: true });
    expect((await ann.get(`${boards(hub)}/${board.id}`)).status).toBe(404);
    expect((await ann.delete(`${boards(hub)}/${hub}`)).status).toBe(400);
    expect((await ann.patch(`${boards(hub)}/${hub}`, { title: "x" })).status).toBe(400);
  });

  it("only its creator or a hub manager changes a board; viewers cannot create; the limit holds", async () => {
    const board = (await cal.post(boards(hub), { title: "Cal's", instruction: "What is the release checklist?" })).body.data.board;
    const other = await h.user("Ola");
    const olaHub = await h.teamHub(ann, [[other, "contributor"]]);
    expect((await other.patch(`${boards(hub)}/${board.id}`, { title: "x" })).status).toBe(404);
    expect((await vic.post(boards(hub), { title: "v", instruction: "v" })).status).toBe(403);
    expect((await vic.patch(`${boards(hub)}/${board.id}`, { title: "x" })).status).toBe(403);
    expect((await ann.patch(`${boards(hub)}/${board.id}`, { title: "Renamed by the owner" })).status).toBe(200);
    expect((await ann.get(`${boards(olaHub)}/${board.id}`)).status).toBe(404);
    expect((await ann.post(boards(hub), { title: "", instruction: "x" })).status).toBe(400);
    const existing = await h.db.customBoard.count({ where: { hubId: hub } });
    for (let i = existing; i < 10; i++) expect((await ann.post(boards(hub), { title: `B${i}`, instruction: "What is the release checklist?" })).status).toBe(201);
    const over = await ann.post(boards(hub), { title: "One too many", instruction: "x" });
    expect([over.status, over.body.error.code, over.body.error.details.limit]).toEqual([409, "board_limit", 10]);
    await customBoardsIdle();
  });

  it("a member demoted or removed between the permission check and the write changes and deletes nothing", async () => {
    const ada = await h.user("Ada");
    const team = await h.teamHub(ann, [[ada, "admin"], [cal, "contributor"]]);
    const board = (await cal.post(boards(team), { title: "Cal's board", instruction: "What is the release checklist?" })).body.data.board;
    await customBoardsIdle();
    // The caller's membership is read (and allows it) first; the change lands as the board is looked
    // up, before the write's transaction — as another request would between the two.
    const callerAs = (who: Client, change: () => Promise<unknown>) => sessionContext(h, who, changedBefore(h.db, ["customBoard.findFirst"], change));
    const setRole = (who: Client, role: string) => () => h.db.hubMember.update({ where: { hubId_userId: { hubId: team, userId: who.id } }, data: { role } });
    const remove = (who: Client) => () => h.db.hubMember.delete({ where: { hubId_userId: { hubId: team, userId: who.id } } });

    // An admin (not the board's creator) made a contributor: no longer one who manages the board.
    await expect(updateBoard(callerAs(ada, setRole(ada, "contributor")), team, board.id, { title: "Renamed by a former admin" })).rejects.toMatchObject({ code: "forbidden" });
    await setRole(ada, "admin")();
    await expect(deleteBoard(callerAs(ada, setRole(ada, "contributor")), team, board.id)).rejects.toMatchObject({ code: "forbidden" });
    // Its creator removed from the hub.
    await expect(deleteBoard(callerAs(cal, remove(cal)), team, board.id)).rejects.toMatchObject({ code: "not_found" });
    expect(await h.db.customBoard.findUnique({ where: { id: board.id } })).toMatchObject({ title: "Cal's board" });
    await customBoardsIdle();
  });

  it("twelve creates at once on an empty hub: ten boards, two refused (the count is taken under a lock)", async () => {
    const fresh = await h.teamHub(ann);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => ann.post(boards(fresh), { title: `At once ${i}`, instruction: "What is the release checklist?" })));
    expect(results.map((r) => r.status).sort()).toEqual([...Array(10).fill(201), 409, 409]);
    expect(await h.db.customBoard.count({ where: { hubId: fresh } })).toBe(10);
    await customBoardsIdle();
  });

  it("works through Memax's SDK", async () => {
    const { Memax } = await loadMemaxSdk();
    const sdk = new Memax({ apiUrl: "http://engram.test", apiKey: ann.key, fetch: routeFetch, maxRetries: 0 });
    const teamHub = await h.teamHub(ann);
    const { board } = await sdk.boards.createBoard(teamHub, { title: "SDK board", instruction: "Anything about releases?" });
    expect(board).toMatchObject({ kind: "custom", status: "cooking" });
    expect((await sdk.boards.listForHub(teamHub)).boards).toHaveLength(2);
    expect((await sdk.boards.updateBoard(teamHub, board.id, { title: "Renamed" })).board.title).toBe("Renamed");
    await customBoardsIdle();
    expect((await sdk.boards.getBoard(teamHub, board.id)).board.status).toBe("active");
    const { slot } = await sdk.boards.resolveSlot(teamHub, `board:${board.id}`, "feedback", "accurate");
    expect(slot).toMatchObject({ state: "resolved", resolution: { action: "feedback", verdict: "accurate" } });
    expect(await sdk.boards.deleteBoard(teamHub, board.id)).toEqual({ deleted: true });
  });
});

describe("custom boards: the background answer", () => {
  it("instructions rewritten while an answer is on its way ask the model once more, with the last one, not once each", async () => {
    const team = await h.teamHub(ann);
    const res = await ann.post("/v1/memories", { content: "# Release gate\nBefore a release the staging smoke tests must pass and the changelog is written." }, { headers: { "x-hub-id": team } });
    expect(res.status, res.text).toBe(201);
    await waitProcessed(h.db, ann, res.body.data.id);
    const fake = await startFakeChat();
    const saved = { ...process.env };
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url, ENGRAM_ASK_MODEL_TIMEOUT_MS: "1500" });
    try {
      fake.reply = "The staging smoke tests must pass [1].";
      fake.stall = true;
      const board = (await ann.post(boards(team), { title: "Gate", instruction: "What must happen before a release?" })).body.data.board;
      for (let waited = 0; fake.requests.length === 0; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The first answer waits on the model; every rewrite meanwhile would start an answer of its own.
      for (let i = 1; i <= 5; i++) {
        expect((await ann.patch(`${boards(team)}/${board.id}`, { instruction: `What must happen before release ${i}?` })).status).toBe(200);
      }
      fake.stall = false;
      await customBoardsIdle();
      expect(fake.requests.length).toBe(2);
      const got = (await ann.get(`${boards(team)}/${board.id}`)).body.data;
      expect(got.board.status).toBe("active");
      expect(got.slots[0].payload).toMatchObject({ instruction: "What must happen before release 5?", answer: "The staging smoke tests must pass [1]." });
    } finally {
      for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENGRAM_ASK_MODEL_TIMEOUT_MS"]) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
      await fake.close();
    }
  });
});

describe("custom boards: a rewrite while a dream run's answer is on its way", () => {
  /**
   * A dream run's refresh was waiting on the model when the instruction was rewritten; the refresh
   * after it answers the new instruction, asked by the rewrite, yet it kept the run's id, and the new
   * card claimed to be that run's answer. The latest kick names the run (none for a rewrite).
   */
  it("the card answering the new instruction names no dream run", async () => {
    const team = await h.teamHub(ann);
    const res = await ann.post("/v1/memories", { content: "# Release gate\nBefore a release the staging smoke tests must pass and the changelog is written." }, { headers: { "x-hub-id": team } });
    expect(res.status, res.text).toBe(201);
    await waitProcessed(h.db, ann, res.body.data.id);
    const fake = await startFakeChat();
    const saved = { ...process.env };
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url, ENGRAM_ASK_MODEL_TIMEOUT_MS: "1500" });
    try {
      fake.reply = "The staging smoke tests must pass [1].";
      const board = (await ann.post(boards(team), { title: "Gate", instruction: "What must happen before a release?" })).body.data.board;
      await customBoardsIdle();
      const run = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": team } });
      expect(run.status, run.text).toBe(202);
      fake.stall = true;
      const asked = fake.requests.length;
      await kickBoardsAfterDream(h.database, team, run.body.data.run_id);
      for (let waited = 0; fake.requests.length === asked; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await ann.patch(`${boards(team)}/${board.id}`, { instruction: "What must happen before a hotfix?" })).status).toBe(200);
      fake.stall = false;
      await customBoardsIdle();
      const slot = (await ann.get(`${boards(team)}/${board.id}`)).body.data.slots[0];
      expect(slot.payload).toMatchObject({ instruction: "What must happen before a hotfix?" });
      // Before, the run's id stuck to the rewrite's answer.
      expect(slot.dream_run_id).toBeUndefined();
    } finally {
      for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENGRAM_ASK_MODEL_TIMEOUT_MS"]) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
      await fake.close();
    }
  });
});

describe("custom boards: a cited memory hard-deleted", () => {
  it("its card is answered again without it, and the versions of the history citing it go with their verdicts", async () => {
    const team = await h.teamHub(ann, [[cal, "contributor"]]);
    const pushTo = async (content: string) => {
      const res = await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": team } });
      expect(res.status, res.text).toBe(201);
      return (await waitProcessed(h.db, ann, res.body.data.id)).id as string;
    };
    const secret = await pushTo("# Vault rotation\nThe vault passphrase is rotated by hand with the word pelican-quartz every month.");
    const other = await pushTo("# Vault access\nThe vault is opened by two on-call engineers together.");
    const board = (await ann.post(boards(team), { title: "Vault", instruction: "How is the vault passphrase rotated?" })).body.data.board;
    await customBoardsIdle();
    const card = await h.db.customBoard.findUniqueOrThrow({ where: { id: board.id } });
    expect(card.cardCiteMemoryIds).toContain(secret);
    expect(JSON.stringify(card.cardPayload)).toMatch(/pelican-quartz/);
    // An older answer in the history citing it, judged by a member; and one that does not cite it.
    const start = Date.now();
    const at = (minutes: number) => new Date(start - minutes * 60_000);
    await h.db.customBoardCardVersion.createMany({
      data: [
        { id: newId(), boardId: board.id, payload: { answer: "Rotated with pelican-quartz [1].", citations: [{ index: 1, memory_id: secret }] }, citeMemoryIds: [secret], contentProducedAt: at(30), createdAt: at(20) },
        { id: newId(), boardId: board.id, payload: { answer: "Two engineers open it [1].", citations: [{ index: 1, memory_id: other }] }, citeMemoryIds: [other], contentProducedAt: at(20), createdAt: at(10) },
      ],
    });
    await h.db.customBoardFeedback.createMany({
      data: [at(30), at(20)].map((contentProducedAt) => ({ boardId: board.id, contentProducedAt, userId: cal.id, verdict: "accurate" })),
    });

    expect((await ann.delete(`/v1/memories/${secret}`)).status).toBe(200);
    await customBoardsIdle();
    const got = (await cal.get(`${boards(team)}/${board.id}`)).body.data;
    expect(JSON.stringify(got)).not.toMatch(/pelican-quartz/);
    expect(got.slots[0]?.cite_memory_ids ?? []).not.toContain(secret);
    const history = (await cal.get(`/v1/hubs/${team}/board/slots/${encodeURIComponent(`board:${board.id}`)}/history`)).body.data.versions;
    expect(JSON.stringify(history)).not.toMatch(/pelican-quartz/);
    expect(history.map((v: { payload: { answer: string } }) => v.payload.answer)).toContain("Two engineers open it [1].");
    expect(await h.db.customBoardFeedback.count({ where: { boardId: board.id, contentProducedAt: at(30) } })).toBe(0);
    expect(await h.db.customBoardFeedback.count({ where: { boardId: board.id, contentProducedAt: at(20) } })).toBe(1);
  });

  it("an answer asked before the delete and written after it is dropped, not kept in the card or its history", async () => {
    const team = await h.teamHub(ann);
    const pushTo = async (content: string) => {
      const res = await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": team } });
      expect(res.status, res.text).toBe(201);
      return (await waitProcessed(h.db, ann, res.body.data.id)).id as string;
    };
    const secret = await pushTo("# Vault rotation\nThe vault passphrase is rotated by hand with the word heron-basalt every month.");
    await pushTo("# Vault access\nThe vault passphrase is kept by two on-call engineers together.");
    const fake = await startFakeChat();
    const saved = { ...process.env };
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url, ENGRAM_ASK_MODEL_TIMEOUT_MS: "1500" });
    try {
      fake.reply = "Two on-call engineers keep it [1].";
      // The first answer has read the memories and waits on the model (then falls back to the extractive answer).
      fake.stall = true;
      const board = (await ann.post(boards(team), { title: "Vault", instruction: "How is the vault passphrase rotated?" })).body.data.board;
      for (let waited = 0; fake.requests.length === 0; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await ann.delete(`/v1/memories/${secret}`)).status).toBe(200);
      fake.stall = false;
      await customBoardsIdle();
      const got = (await ann.get(`${boards(team)}/${board.id}`)).body.data;
      const historyRes = await ann.get(`/v1/hubs/${team}/board/slots/${encodeURIComponent(`board:${board.id}`)}/history`);
      const history = historyRes.body.data.versions;
      expect(JSON.stringify([got, history])).not.toMatch(/heron-basalt/);
      // Asked again without it, rather than left cooking until the next dream run.
      expect(got.slots).toHaveLength(1);
      expect(got.slots[0].cite_memory_ids).not.toContain(secret);
    } finally {
      for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENGRAM_ASK_MODEL_TIMEOUT_MS"]) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
      await fake.close();
    }
  });
});

describe("custom boards: a cited memory moved to another hub", () => {
  /**
   * The move empties the cards already citing the memory, but a refresh whose answer was on its way
   * checked only that each cited memory still existed: it wrote a card in the hub the memory left,
   * citing and quoting it, for that hub's members to read.
   */
  it("an answer asked before the move and written after it is asked again without it", async () => {
    const team = await h.teamHub(ann);
    const pushTo = async (content: string) => {
      const res = await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": team } });
      expect(res.status, res.text).toBe(201);
      return (await waitProcessed(h.db, ann, res.body.data.id)).id as string;
    };
    const moving = await pushTo("# Vault rotation\nThe vault passphrase is rotated by hand with the word osprey-granite every month.");
    await pushTo("# Vault access\nThe vault passphrase is kept by two on-call engineers together.");
    const fake = await startFakeChat();
    const saved = { ...process.env };
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url, ENGRAM_ASK_MODEL_TIMEOUT_MS: "1500" });
    try {
      fake.reply = "Two on-call engineers keep it [1].";
      // The first answer has read the memories and waits on the model (then falls back to the extractive answer).
      fake.stall = true;
      const board = (await ann.post(boards(team), { title: "Vault", instruction: "How is the vault passphrase rotated?" })).body.data.board;
      for (let waited = 0; fake.requests.length === 0; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const moved = await ann.post("/v1/memories/batch-move", { ids: [moving], hub_id: ann.personalHubId });
      expect(moved.status, moved.text).toBe(200);
      expect(moved.body.data.moved).toBe(1);
      fake.stall = false;
      await customBoardsIdle();
      const got = (await ann.get(`${boards(team)}/${board.id}`)).body.data;
      const history = (await ann.get(`/v1/hubs/${team}/board/slots/${encodeURIComponent(`board:${board.id}`)}/history`)).body.data.versions;
      expect(JSON.stringify([got, history])).not.toMatch(/osprey-granite/);
      expect(got.slots).toHaveLength(1);
      expect(got.slots[0].cite_memory_ids).not.toContain(moving);
    } finally {
      for (const key of ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENGRAM_ASK_MODEL_TIMEOUT_MS"]) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
      await fake.close();
    }
  });
});

describe("custom boards: a move while a refresh writes its card", () => {
  /**
   * The refresh's check holds each cited memory (KEY SHARE) until its card commits; the move locks the
   * memories FOR UPDATE before it moves them, so it waits for the card and then empties it. Here the
   * card's write is held by a side transaction on the board's row after the check.
   */
  it.skipIf(!testPostgres())("the move waits for the card and then empties it", async () => {
    const team = await h.teamHub(ann);
    const res = await ann.post("/v1/memories", { content: "# Restores\nA restore drill runs every first Monday with the word lynx-cobalt." }, { headers: { "x-hub-id": team } });
    expect(res.status, res.text).toBe(201);
    const cited = (await waitProcessed(h.db, ann, res.body.data.id)).id as string;
    const board = (await ann.post(boards(team), { title: "Restores", instruction: "When does the restore drill run?" })).body.data.board;
    await customBoardsIdle();
    // A card citing it that the refresh will replace: the answer must change for the refresh to write.
    await h.db.customBoard.update({ where: { id: board.id }, data: { cardPayload: { answer: "older" }, cardCiteMemoryIds: [] } });

    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    const blockedBy = async (pid: number) =>
      (await side.query(`SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND $1::int = ANY(pg_blocking_pids(l.pid))`, [pid])).rows[0].n as number;
    const waitFor = async (what: string, check: () => Promise<boolean>) => {
      for (let waited = 0; !(await check()); waited += 20) {
        if (waited > 20_000) throw new Error(what);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    let refresh: Promise<string> | undefined;
    let move: Promise<{ status: number; text: string }> | undefined;
    try {
      await side.query("BEGIN");
      await side.query("SELECT id FROM custom_boards WHERE id = $1 FOR UPDATE", [board.id]);
      const sidePid = (await side.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      refresh = refreshCustomBoard(h.database, board.id).catch((error: Error) => `failed: ${error.message}`);
      await waitFor("the refresh never reached its card write", async () => (await blockedBy(sidePid)) >= 1);
      // The refresh holds the cited memory now; the move must wait for it.
      move = ann.post("/v1/memories/batch-move", { ids: [cited], hub_id: ann.personalHubId });
      const refreshPid = (await side.query(`SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND $1::int = ANY(pg_blocking_pids(l.pid)) LIMIT 1`, [sidePid])).rows[0].pid as number;
      await waitFor("the move never waited for the refresh", async () => (await blockedBy(refreshPid)) >= 1);
      await side.query("ROLLBACK");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(await refresh!).toBe("written");
    const moved = await move!;
    expect(moved.status, moved.text).toBe(200);
    const after = await h.db.customBoard.findUniqueOrThrow({ where: { id: board.id } });
    expect(after.cardCiteMemoryIds).not.toContain(cited);
    expect(JSON.stringify(after.cardPayload ?? null)).not.toMatch(/lynx-cobalt/);
  });
});

describe("custom boards: a refresh against an account-data deletion of the hub", () => {
  /**
   * The deletion takes the hub's members lock exclusively, then every memory FOR UPDATE; a refresh took
   * KEY SHARE on the memories its card cites, then the members lock shared: opposite orders, so
   * PostgreSQL broke the cycle by failing one of them. Here the deletion's first step is held by a side
   * transaction when the refresh writes its card, and then takes the cited memory as the deletion would.
   */
  it.skipIf(!testPostgres())("the refresh waits for the members lock before it holds any memory, and writes its card after", async () => {
    const team = await h.teamHub(ann);
    const res = await ann.post("/v1/memories", { content: "# Backups\nThe nightly backup is copied to the cold bucket at 03:00." }, { headers: { "x-hub-id": team } });
    expect(res.status, res.text).toBe(201);
    const cited = (await waitProcessed(h.db, ann, res.body.data.id)).id as string;
    const board = (await ann.post(boards(team), { title: "Backups", instruction: "When is the nightly backup copied?" })).body.data.board;
    await customBoardsIdle();
    expect((await h.db.customBoard.findUniqueOrThrow({ where: { id: board.id } })).cardCiteMemoryIds).toContain(cited);

    const side = new pg.Client({ connectionString: h.url! });
    await side.connect();
    let refresh: Promise<string> | undefined;
    let lockedMemory: string;
    try {
      await side.query("BEGIN");
      await side.query("SET LOCAL lock_timeout = '5s'");
      await side.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [`hub-members:${team}`]);
      refresh = refreshCustomBoard(h.database, board.id).catch((error: Error) => `failed: ${error.message}`);
      for (let waited = 0; ; waited += 20) {
        const { rows } = await side.query(`SELECT count(*)::int AS n FROM pg_locks l WHERE NOT l.granted AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))`);
        if (rows[0].n >= 1) break;
        if (waited > 20_000) throw new Error("the refresh never waited for the members lock");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The deletion's next step: every memory of the hub, FOR UPDATE.
      lockedMemory = (await side.query("SELECT id::text AS id FROM memories WHERE id = $1 FOR UPDATE", [cited]).then(
        (r) => r.rows[0].id as string,
        (error: Error) => error.message,
      ));
      await side.query("ROLLBACK");
    } finally {
      await side.query("ROLLBACK").catch(() => {});
      await side.end();
    }
    expect(lockedMemory).toBe(cited);
    expect(await refresh!).toMatch(/^(written|unchanged)$/);
  });
});

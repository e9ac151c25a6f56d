import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InngestTestEngine } from "@inngest/test";
import { dreamRunFunction } from "@/inngest/dream-functions.ts";
import { customBoardsIdle, kickCookingBoards, kickCustomBoard } from "@/lib/boards/kick-custom-board.ts";
import { DREAM_RUN_EVENT, DreamRunner } from "@/lib/dreams/dream-runner.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { newId } from "@/lib/ids.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./support/openai-chat-fake.ts";
import { startFakeChat } from "./support/openai-stream-fake.ts";

// Custom boards answered again after a dream run, against the other background work of the process.

let h: Harness;
let ann: Client;
let chat: FakeOpenAiChat;
const saved = { ...process.env };
const MODEL_ENV = ["ENGRAM_CHAT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];
/** How long the fake model takes over each board's answer. */
const ANSWER_MS = 400;
/** Board answers the fake model is writing right now, and the most at once. */
const answering = { now: 0, most: 0 };
/** A board to kick as the next board answer begins (a member rewriting its instruction just then). */
let kickOnAnswer: string | null = null;

async function pushTo(hubId: string, content: string) {
  const res = await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as string;
}

async function until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000) {
  for (let waited = 0; !(await check()); waited += 20) {
    if (waited > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  h = await createHarness();
  await startBackgroundProcessing();
  ann = await h.user("Ann");
  // Board answers (streamed) take their time; the pipeline's and the dream's structured calls do not.
  chat = await startFakeOpenAiChat(async (schema, body) => {
    if (body.stream) {
      answering.most = Math.max(answering.most, ++answering.now);
      if (kickOnAnswer) kickCustomBoard(kickOnAnswer);
      kickOnAnswer = null;
      await new Promise((resolve) => setTimeout(resolve, ANSWER_MS));
      answering.now -= 1;
    }
    return schema === "memory_classification" ? { kind: "semantic", stability: "evolving" } : schema === "topic_name" ? { name: "Releases" } : { summary: "A note." };
  });
});
afterAll(async () => {
  await customBoardsIdle();
  stopBackgroundProcessing();
  for (const key of MODEL_ENV) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await chat?.close();
  await h?.close();
});

describe("board refreshes after a dream run", () => {
  it("do not hold the dream worker: another hub's run and a new memory are done before the last board is answered", async () => {
    const busy = await h.teamHub(ann);
    const other = await h.teamHub(ann);
    await waitProcessed(h.db, ann, await pushTo(busy, "# Release checklist\nBefore a release the staging smoke tests must pass."));
    await waitProcessed(h.db, ann, await pushTo(other, "# Rollback\nA bad deploy is rolled back with kubectl rollout undo."));
    // Ten boards, written straight to the database so that no create kicks them.
    const boardIds = Array.from({ length: 10 }, () => newId());
    await h.db.customBoard.createMany({
      data: boardIds.map((id, i) => ({ id, hubId: busy, createdBy: ann.id, title: `Board ${i}`, instruction: `What must happen before release ${i}?`, status: "active" })),
    });
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: chat.url });
    const runner = new DreamRunner({ db: async () => h.db, schedule: false, exclusiveDatabase: true });
    try {
      const first = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": busy } });
      expect(first.status, first.text).toBe(202);
      runner.enqueue(first.body.data.run_id);
      // The first board's answer is on its way.
      await until(async () => chat.requests.some((body) => body.stream), "the first board's answer");
      const second = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": other } });
      expect(second.status, second.text).toBe(202);
      runner.enqueue(second.body.data.run_id);
      const memoryId = await pushTo(busy, "# Staging\nThe staging cluster is rebuilt every Monday.");
      await waitProcessed(h.db, ann, memoryId);
      const answeredOnceProcessed = await h.db.customBoard.count({ where: { id: { in: boardIds }, cardAskedAt: { not: null } } });
      expect(answeredOnceProcessed).toBeLessThan(boardIds.length);
      await until(
        async () => ["completed", "partial_failed"].includes((await h.db.dreamRun.findUniqueOrThrow({ where: { id: second.body.data.run_id } })).status),
        "the other hub's dream run",
      );
      const answered = await h.db.customBoard.count({ where: { id: { in: boardIds }, cardAskedAt: { not: null } } });
      expect(answered).toBeLessThan(boardIds.length);
      await runner.idle();
      await customBoardsIdle();
      // Every board is still answered, by the run that refreshed it.
      const written = await h.db.customBoard.findMany({ where: { id: { in: boardIds } }, select: { cardDreamRunId: true, cardPayload: true } });
      expect(written.map((b) => b.cardDreamRunId)).toEqual(boardIds.map(() => first.body.data.run_id));
      expect(written.every((b) => b.cardPayload !== null)).toBe(true);
    } finally {
      runner.stop();
      for (const key of MODEL_ENV) delete process.env[key];
    }
  });

  it("with Inngest, each board is a step of its own after the run's finish, written for that run", async () => {
    const hubId = await h.teamHub(ann);
    await waitProcessed(h.db, ann, await pushTo(hubId, "# Release checklist\nBefore a release the changelog is written."));
    const boardIds = [newId(), newId()];
    await h.db.customBoard.createMany({
      data: boardIds.map((id, i) => ({ id, hubId, createdBy: ann.id, title: `Board ${i}`, instruction: "What must happen before a release?", status: "active" })),
    });
    const runId = (await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    const { result, ctx } = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
    expect(result).toEqual({ status: "completed" });
    for (const id of boardIds) expect(ctx.step.run).toHaveBeenCalledWith(`board-${id}`, expect.any(Function));
    const written = await h.db.customBoard.findMany({ where: { id: { in: boardIds } }, select: { cardDreamRunId: true, status: true } });
    expect(written).toEqual(boardIds.map(() => ({ cardDreamRunId: runId, status: "active" })));
  });
});

describe("the Inngest dream function's board steps against a kick of the same board", () => {
  /**
   * The steps called refreshCustomBoard directly, past the one-refresh-per-board guard a kick goes
   * through: a board kicked (its instruction rewritten) while the function's step asked it was answered
   * twice at once, each a chat model call, the first written for nothing.
   */
  it("answer the board one at a time", async () => {
    const hubId = await h.teamHub(ann);
    await waitProcessed(h.db, ann, await pushTo(hubId, "# Release checklist\nBefore a release the changelog is written."));
    const boardId = newId();
    await h.db.customBoard.create({ data: { id: boardId, hubId, createdBy: ann.id, title: "Releases", instruction: "What must happen before a release?", status: "active" } });
    const runId = (await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": hubId } })).body.data.run_id;
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: chat.url });
    try {
      answering.most = 0;
      const asked = chat.requests.length;
      // The kick lands as the function's board step asks the model.
      kickOnAnswer = boardId;
      const { result } = await new InngestTestEngine({ function: dreamRunFunction, events: [{ name: DREAM_RUN_EVENT, data: { hub_id: hubId, run_id: runId } }] }).execute();
      await customBoardsIdle();
      expect(chat.requests.slice(asked).filter((body) => body.stream)).toHaveLength(2);
      expect(result).toEqual({ status: "completed" });
      expect(answering.most).toBe(1);
    } finally {
      for (const key of MODEL_ENV) delete process.env[key];
    }
  });
});

describe("start-up kicks of cooking boards", () => {
  /**
   * Two processes on one database start together: each start-up kick read the same cooking boards and
   * asked every one of them. Each board is now claimed by one kick; the kicks here share a process, but
   * every claim is the database's, so two processes divide the boards the same way.
   */
  it("two kicks at once ask each cooking board once", async () => {
    const hubId = await h.teamHub(ann);
    await waitProcessed(h.db, ann, await pushTo(hubId, "# Release checklist\nBefore a release the staging smoke tests must pass and the changelog is written."));
    const instructions = Array.from({ length: 6 }, (_, i) => `What must happen before release number ${i}?`);
    await h.db.customBoard.createMany({
      data: instructions.map((instruction, i) => ({ id: newId(), hubId, createdBy: ann.id, title: `Board ${i}`, instruction, status: "cooking" })),
    });
    const fake = await startFakeChat();
    fake.reply = "The staging smoke tests must pass [1].";
    Object.assign(process.env, { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: fake.url });
    try {
      kickCookingBoards(h.database);
      kickCookingBoards(h.database);
      await customBoardsIdle();
      const asked = instructions.map((instruction) => fake.requests.filter((body) => JSON.stringify(body).includes(instruction)).length);
      expect(asked).toEqual(instructions.map(() => 1));
      expect(await h.db.customBoard.count({ where: { hubId, status: "active" } })).toBe(instructions.length);
    } finally {
      for (const key of MODEL_ENV) delete process.env[key];
      await fake.close();
    }
  });
});

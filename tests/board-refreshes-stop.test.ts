import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { customBoardsIdle, kickBoardsAfterDream, kickCookingBoards } from "@/lib/boards/kick-custom-board.ts";
import { openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { createHarness, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { startFakeChat, type FakeChat } from "./support/openai-stream-fake.ts";

// A graceful stop while custom boards' answers are on their way (its own file: each stop closes the database).

let fake: FakeChat;
const MODEL_ENV = { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", ENGRAM_ASK_MODEL_TIMEOUT_MS: "800" };
const saved = { ...process.env };
/** What each test opened, closed after it (a stop closed the first already). */
const opened: { close(): Promise<void> }[] = [];
const dirs: string[] = [];

/** A fresh server's database with one processed memory, its boards' answers asking the fake model. */
async function start(options: { dataDir?: string } = {}): Promise<{ h: Harness; ann: Client }> {
  const h = await createHarness(options);
  opened.push(h);
  await startBackgroundProcessing();
  // The start-up's kick, as startServer's (nothing cooking yet): after the previous test's stop, boards are taken again.
  kickCookingBoards(h.database);
  const ann = await h.user("Ann");
  const res = await ann.post("/v1/memories", { content: "# Release checklist\nBefore a release the staging smoke tests must pass." });
  expect(res.status, res.text).toBe(201);
  await waitProcessed(h.db, ann, res.body.data.id);
  Object.assign(process.env, MODEL_ENV, { OPENAI_BASE_URL: fake.url });
  return { h, ann };
}

/** Cooking boards written straight to the database, as a start-up finds them: nothing kicked them. */
async function cookingBoards(h: Harness, ann: Client, count: number, status = "cooking"): Promise<string[]> {
  const ids = Array.from({ length: count }, () => newId());
  await h.db.customBoard.createMany({
    data: ids.map((id, i) => ({ id, hubId: ann.personalHubId, createdBy: ann.id, title: `Board ${i}`, instruction: `What must happen before release ${i}?`, status })),
  });
  return ids;
}

const asked = () => fake.requests.filter((body) => body?.stream);

async function untilAsked(count: number) {
  for (let waited = 0; asked().length < count; waited += 20) {
    expect(waited).toBeLessThan(20_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const boardErrors = (errors: { mock: { calls: unknown[][] } }) => errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes("boards:"));

beforeAll(async () => {
  fake = await startFakeChat();
});
afterEach(async () => {
  await customBoardsIdle();
  for (const database of opened.splice(0)) await database.close().catch(() => {});
  setDatabase(undefined);
  for (const key of [...Object.keys(MODEL_ENV), "OPENAI_BASE_URL"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  fake.requests.length = 0;
  fake.stall = false;
});
afterAll(async () => {
  await fake?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("a graceful stop", () => {
  it("lets a board answer in progress be written before the database closes", async () => {
    const { ann } = await start();
    // The model never answers: past ENGRAM_ASK_MODEL_TIMEOUT_MS the extractive answer is written.
    fake.stall = true;
    const errors = vi.spyOn(console, "error");
    try {
      const created = await ann.post(`/v1/hubs/${ann.personalHubId}/boards`, { title: "Release", instruction: "What must happen before a release?" });
      expect(created.status, created.text).toBe(201);
      await untilAsked(1);
      await stopServer({ graceMs: 10_000 });
      await customBoardsIdle();
      expect(boardErrors(errors)).toEqual([]);
    } finally {
      errors.mockRestore();
    }
  });

  /**
   * The start-up's kick went on taking cooking boards through the stop: the stop waited for them all,
   * up to the grace, and then closed the database under the next board's answer ("PGlite is closed",
   * that refresh lost). Only the answer on its way is waited for now.
   */
  it("takes no new cooking board once it begins, and closes the database after the answer on its way", async () => {
    const { h, ann } = await start();
    await cookingBoards(h, ann, 3);
    await expectStopAsksOnlyTheFirst(() => kickCookingBoards(h.database));
  });

  it("takes no new board of a dream run's queue once it begins", async () => {
    const { h, ann } = await start();
    await cookingBoards(h, ann, 3, "active");
    const run = await ann.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": ann.personalHubId } });
    expect(run.status, run.text).toBe(202);
    await expectStopAsksOnlyTheFirst(() => kickBoardsAfterDream(h.database, ann.personalHubId, run.body.data.run_id));
  });

  /** With the model stalled, `kick` queues boards; a stop once the first is asked asks no other and logs no board failure. */
  async function expectStopAsksOnlyTheFirst(kick: () => unknown) {
    fake.stall = true;
    const errors = vi.spyOn(console, "error");
    try {
      await kick();
      await untilAsked(1);
      // More than one answer (800 ms), less than two.
      await stopServer({ graceMs: 1_500 });
      await customBoardsIdle();
      expect(asked()).toHaveLength(1);
      expect(boardErrors(errors)).toEqual([]);
    } finally {
      errors.mockRestore();
    }
  }

  /**
   * A start-up's claim (card_asked_at stamped) kept every other start-up off the board for ten minutes,
   * so a board whose answer a stop cut short stayed cooking through a rolling restart until its hub's
   * next dream run. The stop gives the claim back: the next start-up asks it at once.
   */
  it("gives back the claim of a cooking board whose answer it cuts short, so the next start-up asks it at once", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "engram-boards-stop-"));
    dirs.push(dataDir);
    const { h, ann } = await start({ dataDir });
    const [boardId] = await cookingBoards(h, ann, 1);
    fake.stall = true;
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      kickCookingBoards(h.database);
      await untilAsked(1);
      // Less than the answer takes: the stop cuts it short.
      await stopServer({ graceMs: 100 });
      await customBoardsIdle();
    } finally {
      errors.mockRestore();
    }
    // The next start, on the same data.
    const again: Database = await openDatabase({ dataDir });
    opened.push(again);
    setDatabase(again);
    expect(await again.prisma.customBoard.findUniqueOrThrow({ where: { id: boardId }, select: { status: true, cardAskedAt: true } })).toEqual({ status: "cooking", cardAskedAt: null });
    fake.stall = false;
    fake.reply = "The staging smoke tests must pass [1].";
    kickCookingBoards(again);
    await customBoardsIdle();
    expect(await again.prisma.customBoard.findUniqueOrThrow({ where: { id: boardId }, select: { status: true } })).toEqual({ status: "active" });
  });
});

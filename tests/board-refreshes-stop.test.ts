import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { customBoardsIdle } from "@/lib/boards/kick-custom-board.ts";
import { startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { createHarness, waitProcessed, type Harness } from "./support/harness.ts";
import { startFakeChat, type FakeChat } from "./support/openai-stream-fake.ts";

// A graceful stop while a custom board's answer is on its way (its own file: the stop closes the database).

let h: Harness;
let fake: FakeChat;
const MODEL_ENV = { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", ENGRAM_ASK_MODEL_TIMEOUT_MS: "800" };
const saved = { ...process.env };

beforeAll(async () => {
  h = await createHarness();
  await startBackgroundProcessing();
  fake = await startFakeChat();
});
afterAll(async () => {
  for (const key of [...Object.keys(MODEL_ENV), "OPENAI_BASE_URL"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await fake?.close();
  await h?.close().catch(() => {});
});

describe("a graceful stop", () => {
  it("lets a board answer in progress be written before the database closes", async () => {
    const ann = await h.user("Ann");
    const res = await ann.post("/v1/memories", { content: "# Release checklist\nBefore a release the staging smoke tests must pass." });
    expect(res.status, res.text).toBe(201);
    await waitProcessed(h.db, ann, res.body.data.id);
    Object.assign(process.env, MODEL_ENV, { OPENAI_BASE_URL: fake.url });
    // The model never answers: past ENGRAM_ASK_MODEL_TIMEOUT_MS the extractive answer is written.
    fake.stall = true;
    const errors = vi.spyOn(console, "error");
    try {
      const created = await ann.post(`/v1/hubs/${ann.personalHubId}/boards`, { title: "Release", instruction: "What must happen before a release?" });
      expect(created.status, created.text).toBe(201);
      for (let waited = 0; fake.requests.length === 0; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await stopServer({ graceMs: 10_000 });
      await customBoardsIdle();
      expect(errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes("boards:"))).toEqual([]);
    } finally {
      errors.mockRestore();
    }
  });
});

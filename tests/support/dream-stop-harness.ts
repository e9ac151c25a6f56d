import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { createHarness, type Client, type Harness } from "./harness.ts";
import { startFakeOpenAiChat, type FakeOpenAiChat } from "./openai-chat-fake.ts";

export interface DreamStopHarness {
  readonly dataDir: string;
  h: Harness;
  owner: Client;
  fake: FakeOpenAiChat;
  /** Points the dream model at the fake and makes it never answer. */
  hangModel(): void;
  /** Opens the data directory again after a stop closed the database (closed after the file). */
  reopen(): Promise<Database>;
}

/**
 * A harness for a file whose test stops the server (the stop closes the database, so such a test
 * gets a data directory and a file of its own), with a chat-model fake and the model settings
 * `modelEnv`, put back after the file.
 */
export function dreamStopHarness(prefix: string, modelEnv: Record<string, string>): DreamStopHarness {
  const saved = { ...process.env };
  let again: Database | undefined;
  const s = {
    dataDir: mkdtempSync(path.join(tmpdir(), prefix)),
    hangModel() {
      Object.assign(process.env, modelEnv, { OPENAI_BASE_URL: s.fake.url });
      s.fake.mode = "hang";
    },
    async reopen() {
      again = await openDatabase({ dataDir: s.dataDir });
      return again;
    },
  } as DreamStopHarness;
  beforeAll(async () => {
    s.fake = await startFakeOpenAiChat(() => ({}));
    s.h = await createHarness({ dataDir: s.dataDir });
    s.owner = await s.h.user("Owner");
  });
  afterAll(async () => {
    for (const key of [...Object.keys(modelEnv), "OPENAI_BASE_URL"]) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
    await s.h?.database.close().catch(() => {});
    await again?.close().catch(() => {});
    setDatabase(undefined);
    await s.fake?.close();
    rmSync(s.dataDir, { recursive: true, force: true });
  });
  return s;
}

import { describe, expect, it, vi } from "vitest";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { dreamRunner, startDreams } from "@/lib/dreams/dream-runner.ts";
import { claimDreamRun, executeDreamRun, StoppedError } from "@/lib/dreams/run-dream.ts";
import { queueDreamRun } from "@/lib/dreams/trigger-dream.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { indexMemories } from "./recall-helpers.ts";
import { dreamStopHarness } from "./support/dream-stop-harness.ts";

// A graceful stop of a dream run whose model call takes longer than the stop's grace, as with the
// defaults (a 30 s model timeout, a 10 s grace). Its own file: the stop closes the database.

const s = dreamStopHarness("engram-dreams-stop-wait-", { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", ENGRAM_DREAM_MODEL_TIMEOUT_MS: "30000" });

async function seedPair(hubId: string): Promise<string[]> {
  const ids: string[] = [];
  for (const content of ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]) {
    const res = await s.owner.post("/v1/memories", { content, stability: "evolving" }, { headers: { "x-hub-id": hubId } });
    expect(res.status, res.text).toBe(201);
    ids.push(res.body.data.id);
  }
  await indexMemories(s.h.db, ids);
  return ids;
}

describe("a graceful stop during a dream run", () => {
  /**
   * The stop was refused for the record of a phase whose batches were all saved (commitBatch threw before
   * it), so the resumed run did the whole phase again, its model calls included.
   */
  it("records a phase done when its last batch was saved before the stop", async () => {
    const hubId = await s.h.teamHub(s.owner);
    await seedPair(hubId);
    const run = await queueDreamRun(s.h.db, hubId, s.owner.id, new Date());
    const config = dreamConfig();
    expect(await claimDreamRun(s.h.db, run.run_id, "worker", new Date(), config.staleRunMs)).toBe(true);
    let stop = false;
    // Without a model here: the similar phase's one batch is saved, and the stop comes right after it.
    const env = { model: process.env.ENGRAM_CHAT_MODEL };
    delete process.env.ENGRAM_CHAT_MODEL;
    try {
      const afterBatch = (phase: string) => void (phase === "similar" && (stop = true));
      await expect(executeDreamRun({ db: s.h.db, sql: s.h.database.sql, config, afterBatch, stopping: () => stop }, run.run_id, "worker")).rejects.toBeInstanceOf(StoppedError);
    } finally {
      if (env.model !== undefined) process.env.ENGRAM_CHAT_MODEL = env.model;
    }
    const row = await s.h.db.dreamRun.findUniqueOrThrow({ where: { id: run.run_id } });
    expect(row.phase).toBe("stale");
    expect(await s.h.db.dreamAction.count({ where: { runId: run.run_id, actionType: "merge" } })).toBe(1);
  }, 60_000);

  /**
   * The model call in flight was waited for up to its timeout, past the grace: the stop closed the
   * database while the run still held a fresh heartbeat (never cleared), so with PostgreSQL no other
   * worker took it before the stale timeout. The stop now cancels the call, and the run is left to
   * resume at once.
   */
  it("cancels the run's model call in flight, so the run is left resumable within the grace", async () => {
    const ids = await seedPair(s.owner.personalHubId);
    s.hangModel();
    await startDreams();
    const runner = dreamRunner()!;
    expect(runner).toBeDefined();
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const run = await s.owner.post("/v1/dreams/trigger", undefined, { headers: { "x-hub-id": s.owner.personalHubId } });
      expect(run.status, run.text).toBe(202);
      for (let waited = 0; s.fake.requests.length === 0; waited += 20) {
        expect(waited).toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const stopped = await stopServer({ graceMs: 2_000 });
      expect(stopped.unfinishedJobs).toBe(0);
      expect(errors.mock.calls.map((call) => String(call[0])).filter((line) => /dream/.test(line))).toEqual([]);
    } finally {
      errors.mockRestore();
    }
    const again = await s.reopen();
    const runId = (await again.prisma.dreamRun.findFirstOrThrow({ where: { hubId: s.owner.personalHubId } })).id;
    expect(await again.prisma.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { status: true, phase: true, heartbeatAt: true } })).toEqual({ status: "running", phase: "similar", heartbeatAt: null });
    expect(await again.prisma.dreamAction.count({ where: { runId } })).toBe(0);
    expect(await again.prisma.memory.count({ where: { id: { in: ids }, state: "active" } })).toBe(2);
  }, 60_000);
});

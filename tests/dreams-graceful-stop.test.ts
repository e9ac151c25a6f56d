import { describe, expect, it, vi } from "vitest";
import { dreamRunner, startDreams } from "@/lib/dreams/dream-runner.ts";
import { stopServer } from "@/lib/system/stop-server.ts";
import { indexMemories } from "./recall-helpers.ts";
import { dreamStopHarness } from "./support/dream-stop-harness.ts";

// A graceful stop while the in-process worker runs a dream (its own file: the stop closes the database).

const s = dreamStopHarness("engram-dreams-stop-", { ENGRAM_CHAT_MODEL: "gpt-fake", OPENAI_API_KEY: "sk-test", ENGRAM_DREAM_MODEL_TIMEOUT_MS: "1500" });

describe("a graceful stop during a dream run", () => {
  /**
   * The stop did not wait for the in-process dream worker nor tell its run to stop: the run went on
   * (here, waiting on the chat model's merge) and wrote its next batch into the database the stop had
   * closed, logging the run as failed on every such stop. It now ends between its batches, left to be
   * resumed, within the grace.
   */
  it("stops the run between its batches, before the database closes, logging no failure", async () => {
    const ids: string[] = [];
    for (const content of ["Use pnpm, not npm, for installing dependencies in the web repo.", "In the web repo we install dependencies with pnpm instead of npm."]) {
      const res = await s.owner.post("/v1/memories", { content, stability: "evolving" });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    await indexMemories(s.h.db, ids);
    // The merge's rewrite waits on a model that never answers, up to ENGRAM_DREAM_MODEL_TIMEOUT_MS.
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
      const stopped = await stopServer({ graceMs: 5_000 });
      await runner.idle();
      expect(stopped.unfinishedJobs).toBe(0);
      expect(errors.mock.calls.map((call) => String(call[0])).filter((line) => line.includes("dreams:"))).toEqual([]);
    } finally {
      errors.mockRestore();
    }
    // The next start, on the same data: the run is there to resume, nothing of its unfinished batch written.
    const again = await s.reopen();
    const runId = (await again.prisma.dreamRun.findFirstOrThrow({ where: { hubId: s.owner.personalHubId } })).id;
    expect(await again.prisma.dreamRun.findUniqueOrThrow({ where: { id: runId }, select: { status: true, phase: true, heartbeatAt: true } })).toEqual({ status: "running", phase: "similar", heartbeatAt: null });
    expect(await again.prisma.dreamAction.count({ where: { runId } })).toBe(0);
    expect(await again.prisma.memory.count({ where: { id: { in: ids }, state: "active" } })).toBe(2);
  }, 60_000);
});

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, expect, it } from "vitest";
import { openDatabase } from "@/lib/db/database.ts";
import { testPostgres } from "./support/harness.ts";
import { createTestDatabase } from "./support/postgres.ts";

const COUNT = 24;
// The children open the database by path (PGlite) or, under `npm run test:postgres`, by URL.
const postgres = testPostgres();
const copy = postgres ? await createTestDatabase(postgres) : undefined;
const dataDir = copy?.url ?? mkdtempSync(path.join(tmpdir(), "engram-restart-"));
afterAll(() => (copy ? copy.drop() : rmSync(dataDir, { recursive: true, force: true })));

function child(...args: string[]): { proc: ChildProcess; lines: AsyncIterable<string>; exit: Promise<number | null> } {
  const proc = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "processing-restart-child.ts"), ...args], {
    cwd: process.cwd(),
    env: {
      ...process.env,
      ENGRAM_PROCESSING_CONCURRENCY: "4",
      // On PostgreSQL another process could own a `running` job, so a restart resumes it only once it
      // is stale (PGlite has one process: at once). Short here so the test does not wait 5 minutes.
      ...(copy && { ENGRAM_PROCESSING_STALE_SECONDS: "20", ENGRAM_PROCESSING_SWEEP_SECONDS: "2" }),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exit = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  return { proc, lines: createInterface({ input: proc.stdout! }), exit };
}

it("kill -9 in the middle of processing loses nothing: a restart finishes every memory exactly once", { timeout: 240_000 }, async () => {
  const seed = child("seed", dataDir, String(COUNT));
  expect(await seed.exit).toBe(0);

  // First worker: killed without warning once some memories are done and others are mid-pipeline.
  const first = child("process", dataDir);
  let atKill: Record<string, number> = {};
  for await (const line of first.lines) {
    const counts = JSON.parse(line) as Record<string, number>;
    if ((counts.done ?? 0) >= 5 && (counts.running ?? 0) > 0) {
      first.proc.kill("SIGKILL");
      atKill = counts;
      break;
    }
  }
  expect(await first.exit).toBeNull(); // died by signal
  expect(atKill.done).toBeLessThan(COUNT);

  // Second worker: resumes the orphaned running jobs and the pending ones at start-up.
  const second = child("process", dataDir);
  let last: Record<string, number> = {};
  for await (const line of second.lines) last = JSON.parse(line);
  expect(await second.exit).toBe(0);
  expect(last).toEqual({ done: COUNT });

  const database = await openDatabase(copy ? { url: copy.url } : { dataDir });
  try {
    const memories = await database.prisma.memory.findMany({ select: { id: true, summary: true, processingAttempts: true, processingError: true } });
    expect(memories).toHaveLength(COUNT);
    for (const memory of memories) {
      expect(memory.summary).not.toBe("");
      expect(memory.processingError).toBeNull();
      expect(memory.processingAttempts).toBeLessThanOrEqual(2);
    }
    // The killed jobs were retried: at least one memory needed a second attempt.
    expect(memories.some((m) => m.processingAttempts === 2)).toBe(true);
    const chunks = await database.sql.query<{ memory_id: string; n: number; positions: number; vectors: number }>(
      `SELECT memory_id, count(*)::int AS n, count(DISTINCT position)::int AS positions, count(embedding)::int AS vectors
         FROM chunks GROUP BY memory_id`,
    );
    expect(chunks).toHaveLength(COUNT);
    for (const row of chunks) {
      expect(row.n).toBeGreaterThan(1);
      expect(row.positions).toBe(row.n); // no duplicates from the interrupted attempt
      expect(row.vectors).toBe(row.n);
    }
  } finally {
    await database.close();
  }
});

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventually, startEngram, type Engram } from "./support/engram.ts";

/**
 * SIGTERM, as a process manager or a rolling deploy sends it, to the built server (`npm start`):
 * the request in progress is answered, an open event stream does not hold the stop up, counters
 * batched in memory are written, the process exits 0, and a restart on the same data directory
 * has everything that was acknowledged. And one embedded data directory serves one process.
 */
describe("the built server's lifecycle: graceful stop, restart, one process per embedded data directory", () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "engram-compat-stop-"));
  let engram: Engram | undefined;
  afterAll(async () => {
    await engram?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("answers the request in progress, writes what is batched, exits 0 and keeps everything", async () => {
    const first = await startEngram({}, { dataDir });
    engram = first;
    const ada = await first.user("Ada");
    const pushed = await ada.api("POST", "/v1/memories", { content: "# Backups\n\nThe orion database is backed up nightly at 02:00 UTC." });
    expect(pushed.status).toBe(201);

    // An event stream stays open through the stop; the server closes it instead of waiting for it.
    const stream = await fetch(`${first.url}/v1/events/stream`, { headers: { authorization: `Bearer ${ada.key}` } });
    expect(stream.status).toBe(200);
    const streamEnded = (async () => {
      const reader = stream.body!.getReader();
      for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return true;
    })();

    // A push whose body is still arriving when SIGTERM comes.
    const body = JSON.stringify({ content: "# Deploys\n\nThe web tier is deployed blue-green on Tuesdays after the standup." });
    const { port } = new URL(first.url);
    const slow = request({ host: "127.0.0.1", port, method: "POST", path: "/v1/memories", headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } });
    const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
      slow.on("response", (res: IncomingMessage) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      });
      slow.on("error", reject);
    });
    slow.write(body.slice(0, 10));
    await new Promise((resolve) => setTimeout(resolve, 200));

    // A recall right before the signal: its usage count is still batched in memory (written within 250 ms).
    const recall = await ada.api("POST", "/v1/recall", { query: "when is the orion database backed up?" });
    expect(recall.status).toBe(200);
    const stopped = first.stop();
    await eventually(async () => /engram: SIGTERM, stopping \(requests in progress: 1\)/.test(first.log()), 10_000, "the server to start stopping");
    // New connections are refused while it drains.
    await expect(fetch(`${first.url}/v1/health`)).rejects.toThrow();
    slow.end(body.slice(10));
    const slowAnswer = await answered;
    expect(slowAnswer.status, slowAnswer.text).toBe(201);
    const slowId = JSON.parse(slowAnswer.text).data.id as string;

    const started = Date.now();
    const exit = await stopped;
    engram = undefined;
    expect(exit, first.log().slice(-3000)).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(first.log()).toMatch(/engram: stopped: counters written, database closed\n/);
    expect(await streamEnded).toBe(true);

    // The same data directory again: the key, both pushes and the counts are there, and the
    // push that arrived during the stop gets processed (here or, had it been cut short, after the restart).
    const second = await startEngram({}, { dataDir, adminToken: first.adminToken });
    engram = second;
    const again = (method: string, route: string) =>
      fetch(`${second.url}${route}`, { method, headers: { authorization: `Bearer ${ada.key}` } }).then(async (res) => ({ status: res.status, body: await res.json() }));
    const list = await again("GET", "/v1/memories?limit=100");
    expect(list.status).toBe(200);
    expect(list.body.data.memories.map((m: { id: string }) => m.id).sort()).toEqual([pushed.body.data.id, slowId].sort());
    const usage = await again("GET", "/v1/usage");
    expect(usage.body.data).toMatchObject({ push_count: 2, recall_count: 1 });
    await eventually(async () => {
      const memory = await again("GET", `/v1/memories/${slowId}`);
      return memory.body.data.processing_status === "done";
    }, 120_000, "the memory pushed during the stop to be processed");
  });

  /**
   * `npm start` on a fresh data directory, sent SIGTERM as soon as its output matches `when`; resolves
   * with how it exited and everything it printed.
   */
  async function sigtermFreshStart(port: number, when: RegExp) {
    const fresh = mkdtempSync(path.join(tmpdir(), "engram-compat-start-"));
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: "production", PORT: String(port), HOSTNAME: "127.0.0.1", ENGRAM_DATA_DIR: fresh, NEXT_TELEMETRY_DISABLED: "1" };
    for (const name of ["DATABASE_URL", "VITEST", "VITEST_WORKER_ID", "VITEST_POOL_ID"]) delete env[name];
    const root = path.resolve(import.meta.dirname, "..", "..");
    const child = spawn(process.execPath, [path.join(root, "scripts", "start.mjs")], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
    try {
      await new Promise<void>((resolve) => {
        const append = (chunk: Buffer) => {
          output += chunk.toString("utf8");
          if (when.test(output)) resolve();
        };
        child.stdout!.on("data", append);
        child.stderr!.on("data", append);
      });
      child.kill("SIGTERM");
      return { exit: await exited, output };
    } finally {
      child.kill("SIGKILL");
      rmSync(fresh, { recursive: true, force: true });
    }
  }

  it("a SIGTERM while the app is still being prepared stops npm start with 0, not by the signal's default action", async () => {
    // Next prints this while it prepares the app, before the server listens (some 150 ms later at rest).
    const { exit, output } = await sigtermFreshStart(3157, /Running next\.config/);
    expect(exit, output).toEqual({ code: 0, signal: null });
    // The start (register(): the database opened, migrated, background work begun) finishes and is
    // then stopped the usual way, so the embedded database is closed, not left mid-way.
    expect(output).not.toContain("stopped before the app had started");
    if (output.includes("engram: listening")) {
      // A loaded machine prepared the app before the signal was handled: the next test's path.
      expect(output).toMatch(/engram: stopped: counters written, database closed/);
    } else {
      expect(output).toMatch(/engram: SIGTERM while starting: stopping once the start has finished/);
      expect(output).toMatch(/engram: stopped before listening/);
    }
  });

  it("a SIGTERM once listening but before the database is open and migrated waits for the start, then stops it", async () => {
    // Next listens before instrumentation's register() has finished: on a fresh data directory the
    // embedded database is still being created and migrated (seconds) when this line prints.
    const { exit, output } = await sigtermFreshStart(3158, /engram: listening/);
    expect(exit, output).toEqual({ code: 0, signal: null });
    // Exiting at once ("stopped before the app had started") left the database mid-migration.
    expect(output).not.toContain("stopped before the app had started");
    expect(output).toMatch(/engram: stopped: counters written, database closed/);
  });

  it("a second server on the same embedded data directory exits at once; the first keeps serving", async () => {
    const shared = mkdtempSync(path.join(tmpdir(), "engram-compat-twice-"));
    const owner = await startEngram({}, { dataDir: shared });
    try {
      const started = Date.now();
      const second = startEngram({}, { dataDir: shared });
      await expect(second).rejects.toThrow(/The embedded database in .* is in use by process \d+/);
      expect(Date.now() - started).toBeLessThan(60_000);
      const health = await fetch(`${owner.url}/v1/health`);
      expect(health.status).toBe(200);
    } finally {
      // On failure the message carries the server's last output (why the stop did not end with 0).
      const stopped = await owner.stop();
      expect(stopped, owner.log().slice(-4000)).toEqual({ code: 0, signal: null });
      rmSync(shared, { recursive: true, force: true });
    }
  });
});

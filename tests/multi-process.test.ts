import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { PostgresThrottleStore } from "@/lib/auth/postgres-throttle-store.ts";
import { openDatabase, type Database } from "@/lib/db/database.ts";
import { createUser } from "@/lib/users/create-user.ts";

/**
 * Two Engram server processes on one PostgreSQL database (issue 16, item 2). Each is a separate Node
 * process (tests/support/multi-process-server.ts: the start-up `npm start` runs — migrate, background
 * processing — in front of the real route handlers; no production build needed) with its own pool, its
 * own job runner and its own LISTEN connection. Embeddings go to a local fake of the OpenAI API that
 * tells the processes apart by their API key and can hold a request, so a test knows which process
 * runs a job and can kill it mid-job.
 *
 * Needs a real PostgreSQL server (PGlite opens a database in one process only), e.g.
 *   ENGRAM_TEST_POSTGRES_URL=$(../shared/tools/pg-server start | tail -1 | cut -d= -f2-) npx vitest run tests/multi-process.test.ts
 * (DATABASE_URL pointing at PostgreSQL works too). Without one the suite is skipped, so `npm test` on PGlite is unaffected.
 */
// Under `npm run test:postgres` the run's own server (its global setup started pg-server).
const serverUrl =
  inject("postgres")?.adminUrl || process.env.ENGRAM_TEST_POSTGRES_URL || (process.env.DATABASE_URL?.startsWith("postgres") ? process.env.DATABASE_URL : undefined);
if (!serverUrl) console.warn("tests/multi-process.test.ts skipped: set ENGRAM_TEST_POSTGRES_URL (or DATABASE_URL) to a PostgreSQL server, e.g. from ../shared/tools/pg-server start");

// Short enough for a quick takeover, long enough that a renewal every third of it is never late on a loaded machine.
const LEASE_SECONDS = 5;
const HEAVY_CAP = 6;
const PORTS = { A: 3141, B: 3142 } as const;
type Name = keyof typeof PORTS;

interface Embedded {
  proc: string;
  text: string;
}

/** The OpenAI embeddings endpoint, answering with a deterministic 384-d vector; `hold(marker)` parks the first request containing it. */
class FakeEmbeddings {
  readonly inputs: Embedded[] = [];
  private readonly holds = new Map<string, { promise: Promise<void>; release: () => void; seen: boolean }>();
  private server!: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer(async (req, res) => {
      const body = await readBody(req);
      const proc = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
      const inputs: string[] = Array.isArray(body?.input) ? body.input : [body?.input ?? ""];
      for (const text of inputs) this.inputs.push({ proc, text });
      for (const [marker, hold] of this.holds) {
        if (!hold.seen && inputs.some((t) => t.includes(marker))) {
          hold.seen = true;
          await hold.promise;
        }
      }
      if (res.destroyed) return;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          object: "list",
          model: body?.model,
          data: inputs.map((text, index) => ({ object: "embedding", index, embedding: vectorFor(text, body?.dimensions ?? 384) })),
          usage: { prompt_tokens: 1, total_tokens: 1 },
        }),
      );
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  hold(marker: string): () => void {
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.holds.set(marker, { promise, release, seen: false });
    return release;
  }

  /** Which processes embedded texts containing `marker`, in order. */
  embeddersOf(marker: string): string[] {
    return this.inputs.filter((i) => i.text.includes(marker)).map((i) => i.proc);
  }

  close(): Promise<void> {
    for (const hold of this.holds.values()) hold.release();
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function readBody(req: IncomingMessage): Promise<any> {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  return raw ? JSON.parse(raw) : undefined;
}

function vectorFor(text: string, dimensions: number): number[] {
  const v = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().split(/\W+/).filter(Boolean)) {
    let h = 0;
    for (const c of word) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    v[h % dimensions]! += 1;
  }
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

interface Proc {
  name: Name;
  base: string;
  child: ChildProcess;
  log: () => string;
}

async function until<T>(what: string, probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!serverUrl)("several server processes on one PostgreSQL database", () => {
  let admin: pg.Client;
  let dbName: string;
  let url: string;
  let database: Database;
  let fake: FakeEmbeddings;
  const procs = {} as Record<Name, Proc>;
  let annKey: string;
  let rlKey: string;

  async function startProc(name: Name): Promise<Proc> {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "support", "multi-process-server.ts")], {
      cwd: path.resolve(import.meta.dirname, ".."),
      env: {
        ...process.env,
        DATABASE_URL: url,
        PORT: String(PORTS[name]),
        ENGRAM_EMBEDDINGS_PROVIDER: "openai",
        OPENAI_BASE_URL: fake.url,
        OPENAI_API_KEY: `proc-${name}`,
        ENGRAM_CHAT_MODEL: "",
        UPSTASH_REDIS_REST_URL: "",
        UPSTASH_REDIS_REST_TOKEN: "",
        INNGEST_EVENT_KEY: "",
        INNGEST_DEV: "",
        ENGRAM_RATE_LIMIT_STORE: "",
        ENGRAM_PROCESSING_LEASE_SECONDS: String(LEASE_SECONDS),
        ENGRAM_PROCESSING_SWEEP_SECONDS: "1",
        ENGRAM_PROCESSING_CONCURRENCY: "4",
        ENGRAM_PROCESSING_RETRY_BASE_MS: "200",
        ENGRAM_RATE_LIMIT_HEAVY: String(HEAVY_CAP),
        ENGRAM_DB_POOL_SIZE: "4",
        NODE_ENV: "production",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    child.stdout!.on("data", (d) => (log += d));
    child.stderr!.on("data", (d) => (log += d));
    await until(`process ${name} to listen`, () => {
      if (child.exitCode !== null) throw new Error(`process ${name} exited (${child.exitCode}):\n${log}`);
      return log.includes('"ready"');
    }, 90_000);
    const proc = { name, base: `http://127.0.0.1:${PORTS[name]}`, child, log: () => log };
    procs[name] = proc;
    return proc;
  }

  const request = async (name: Name, key: string, method: string, route: string, body?: unknown) => {
    const res = await fetch(`${procs[name].base}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };

  const status = (id: string) => database.prisma.memory.findUnique({ where: { id }, select: { processingStatus: true, processingAttempts: true } });

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    dbName = `engram_multi_${Date.now().toString(36)}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const parsed = new URL(serverUrl!);
    parsed.pathname = `/${dbName}`;
    url = parsed.toString();
    fake = new FakeEmbeddings();
    await fake.start();
    // Both start at once on the empty database: they migrate it in turn (one applies, the other finds it done).
    await Promise.all([startProc("A"), startProc("B")]);
    database = await openDatabase({ url });
    const now = new Date();
    const make = async (email: string) =>
      (await createUser(database.prisma, { email, name: email.split("@")[0]! }, now, (tx, created) => insertApiKey(tx, created.user.id, "test", now))).extra.key;
    annKey = await make("ann@example.test");
    rlKey = await make("rl@example.test");
  });

  afterAll(async () => {
    // ENGRAM_MULTI_LOGS=dir keeps each process's output there (for diagnosing a failure).
    if (process.env.ENGRAM_MULTI_LOGS) for (const proc of Object.values(procs)) writeFileSync(path.join(process.env.ENGRAM_MULTI_LOGS, `process-${proc.name}.log`), proc.log());
    for (const proc of Object.values(procs)) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill("SIGKILL");
        await new Promise((r) => proc.child.once("exit", r));
      }
    }
    await fake?.close();
    await database?.close();
    // Closed pools finish hanging up asynchronously: a forced drop would reach a client mid-goodbye as an unhandled error.
    if (admin) {
      await until("the database's connections to close", async () => {
        const { rows } = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [dbName]);
        return rows[0].n === 0;
      }, 10_000).catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    }
    await admin?.end();
  });

  it("shares the pipeline: every job runs exactly once, and both processes take jobs", async () => {
    // Writes alternate between the processes, and both sweep every second, so each memory is offered to both.
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await request(i % 2 ? "B" : "A", annKey, "POST", "/v1/memories", { content: `Shared pipeline note token${i}x about deploys.` });
      expect(res.status).toBe(201);
      ids.push(res.body.data.id);
    }
    await until("all 40 memories processed", async () => (await database.prisma.memory.count({ where: { id: { in: ids }, processingStatus: "done" } })) === 40, 60_000);
    const rows = await database.prisma.memory.findMany({ where: { id: { in: ids } }, select: { processingAttempts: true } });
    expect(rows.map((r) => r.processingAttempts)).toEqual(ids.map(() => 1));
    const embedders = ids.map((_, i) => fake.embeddersOf(`token${i}x`));
    // Each memory's one chunk was embedded exactly once, by one process.
    expect(embedders.map((e) => e.length)).toEqual(ids.map(() => 1));
    const perProcess = embedders.flat().reduce<Record<string, number>>((acc, p) => ({ ...acc, [p]: (acc[p] ?? 0) + 1 }), {});
    expect(Object.keys(perProcess).sort()).toEqual(["proc-A", "proc-B"]);
  });

  it("renews the lease of a job that runs longer than the lease: the other process leaves it alone", async () => {
    const release = fake.hold("LONGJOB");
    const res = await request("A", annKey, "POST", "/v1/memories", { content: "A LONGJOB note that embeds slowly." });
    const id = res.body.data.id as string;
    await until("the job to start", () => fake.embeddersOf("LONGJOB").length === 1);
    // Three leases long: without renewal the other process's sweep would have taken it over twice.
    await new Promise((r) => setTimeout(r, 3 * LEASE_SECONDS * 1000));
    expect(await status(id)).toEqual({ processingStatus: "running", processingAttempts: 1 });
    release();
    await until("the long job to finish", async () => (await status(id))?.processingStatus === "done");
    expect(await status(id)).toEqual({ processingStatus: "done", processingAttempts: 1 });
    expect(fake.embeddersOf("LONGJOB")).toHaveLength(1);
  });

  it("delivers an event caused by a write on one process to a stream connected to the other", async () => {
    const abort = new AbortController();
    const res = await fetch(`${procs.B.base}/v1/events/stream?types=memory.created`, {
      headers: { authorization: `Bearer ${annKey}`, accept: "text/event-stream" },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    let text = "";
    const reader = res.body!.getReader();
    const reading = (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          text += new TextDecoder().decode(value);
        }
      } catch {
        // aborted
      }
    })();
    await until("the stream to be ready", () => text.includes("event: ready"), 10_000);
    const created = await request("A", annKey, "POST", "/v1/memories", { content: "Written on process A, announced on process B." });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    await until("the event on process B", () => text.includes(id), 10_000);
    expect(text).toMatch(new RegExp(`event: memory\\.created\\n(?:id: \\d+\\n)?data: .*"entity_id":"${id}"`));
    abort.abort();
    await reading;
  });

  it("keeps each process's lexical index current with the other's writes", async () => {
    // The memory's processing is held, so it has no chunk or vector: only the lexical leg (B's
    // in-memory index, answering on its own from B's first recall) can find it.
    const release = fake.hold("holdmarker");
    try {
      const warm = await request("B", annKey, "POST", "/v1/recall", { query: "quillwort survey", no_rerank: true });
      expect(warm.status).toBe(200);
      const created = await request("A", annKey, "POST", "/v1/memories", { content: "The quillwort survey of the upper lake is due in May (holdmarker)." });
      expect(created.status).toBe(201);
      const id = created.body.data.id as string;
      const found = await request("B", annKey, "POST", "/v1/recall", { query: "quillwort survey", no_rerank: true });
      expect(found.status).toBe(200);
      expect(found.body.data.memories[0]?.id).toBe(id);
      expect((await request("A", annKey, "DELETE", `/v1/memories/${id}`)).status).toBe(200);
      const gone = await request("B", annKey, "POST", "/v1/recall", { query: "quillwort survey", no_rerank: true });
      expect(gone.status).toBe(200);
      expect(gone.body.data.memories.map((m: { id: string }) => m.id)).not.toContain(id);
    } finally {
      release();
    }
  });

  it("agrees on the signing secret: a list cursor from one process pages on the other", async () => {
    for (let i = 0; i < 3; i++) expect((await request("A", annKey, "POST", "/v1/memories", { content: `Cursor page note ${i}.` })).status).toBe(201);
    const first = await request("A", annKey, "GET", "/v1/memories?limit=2");
    expect(first.status).toBe(200);
    expect(first.body.data.next_cursor).toBeTruthy();
    const next = await request("B", annKey, "GET", `/v1/memories?limit=2&cursor=${encodeURIComponent(first.body.data.next_cursor)}`);
    expect(next.status).toBe(200);
    const firstIds = first.body.data.memories.map((m: { id: string }) => m.id);
    expect(next.body.data.memories.length).toBeGreaterThanOrEqual(1);
    for (const m of next.body.data.memories) expect(firstIds).not.toContain(m.id);
  });

  it("shares each user's rate limit between the processes (PostgreSQL counters by default)", async () => {
    // Stay inside one 60 s window, so the sliding window's weighting of the previous one plays no part.
    const intoWindow = Date.now() % 60_000;
    if (intoWindow > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoWindow + 100));
    const statuses: Record<Name, number[]> = { A: [], B: [] };
    for (const name of ["A", "B"] as const) {
      for (let i = 0; i < 4; i++) statuses[name].push((await request(name, rlKey, "POST", "/v1/recall", { query: "deploys" })).status);
    }
    expect(statuses.A).toEqual([200, 200, 200, 200]);
    expect(statuses.B).toEqual([200, 200, 429, 429]);
    const refused = await request("A", rlKey, "POST", "/v1/recall", { query: "deploys" });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("rate_limited");
    expect(refused.headers.get("x-ratelimit-limit")).toBe(String(HEAVY_CAP));
    expect(refused.headers.get("x-ratelimit-remaining")).toBe("0");
  });

  it("shares sign-in failure locks through PostgreSQL: a lock earned through one pool holds on another", async () => {
    const other = await openDatabase({ url, migrate: false });
    try {
      const storeA = new PostgresThrottleStore(async () => database.prisma);
      const storeB = new PostgresThrottleStore(async () => other.prisma);
      const now = Date.now();
      // The fourth failure earns the first lock (30 s).
      // Concurrent failures from both "processes" are each counted once.
      const states = await Promise.all([storeA, storeB, storeA, storeB].map((store) => store.fail("acct:mp@example.test", 4, 60_000, now)));
      expect(states.map((s) => s.failures).sort()).toEqual([1, 2, 3, 4]);
      const [seen] = await storeB.get(["acct:mp@example.test"]);
      expect(seen).toEqual({ failures: 4, until: now + 30_000 });
      await storeA.clear("acct:mp@example.test");
      expect(await storeB.get(["acct:mp@example.test"])).toEqual([undefined]);
    } finally {
      await other.close();
    }
  });

  it("finishes the job of a process killed with kill -9 on the other, once its lease expires", async () => {
    const release = fake.hold("KILLJOB");
    const res = await request("A", annKey, "POST", "/v1/memories", { content: "A KILLJOB note whose worker dies mid-job." });
    const id = res.body.data.id as string;
    const [owner] = await until("the job to start", () => {
      const seen = fake.embeddersOf("KILLJOB");
      return seen.length === 1 && seen;
    });
    const victim = procs[owner!.replace("proc-", "") as Name];
    const survivor = victim.name === "A" ? "proc-B" : "proc-A";
    expect(await status(id)).toEqual({ processingStatus: "running", processingAttempts: 1 });
    const killedAt = Date.now();
    victim.child.kill("SIGKILL");
    await new Promise((r) => victim.child.once("exit", r));
    release();
    await until("the survivor to finish the job", async () => (await status(id))?.processingStatus === "done", 30_000);
    // Taken over only after the lease ran out, by the other process, as attempt 2.
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual((LEASE_SECONDS * 1000 * 2) / 3 - 200);
    expect(await status(id)).toEqual({ processingStatus: "done", processingAttempts: 2 });
    expect(fake.embeddersOf("KILLJOB")).toEqual([owner, survivor]);
  });
});

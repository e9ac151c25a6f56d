import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { copyToPostgres } from "@/lib/db/copy-to-postgres.ts";
import { startBackgroundProcessing, stopBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { createHarness, templateSnapshot, testPostgres, waitProcessed, type Client, type Harness } from "./support/harness.ts";
import { createTestDatabase } from "./support/postgres.ts";

/**
 * `npm run db:copy-to-postgres`: an embedded install moved to PostgreSQL keeps working with the same
 * keys, data and recall. Runs under `npm run test:postgres` (it needs a PostgreSQL server to copy into).
 */
const postgres = testPostgres();

describe.skipIf(!postgres)("copying the embedded database into PostgreSQL", () => {
  let h: Harness;
  let ann: Client;
  let bob: Client;
  let hub: string;
  const targets: { drop(): Promise<void> }[] = [];
  let target: Database | undefined;
  const newTarget = async () => {
    const created = await createTestDatabase(postgres!);
    targets.push(created);
    return created.url;
  };

  beforeAll(async () => {
    h = await createHarness({ embedded: true });
    [ann, bob] = [await h.user("Ann"), await h.user("Bob")];
    hub = await h.teamHub(ann, [[bob, "contributor"]]);
    await startBackgroundProcessing();
  });
  afterAll(async () => {
    stopBackgroundProcessing();
    await flushAccess();
    await flushUsage();
    setDatabase(undefined);
    await target?.close();
    await h?.close();
    for (const created of targets) await created.drop();
  });

  it("copies every table in one transaction; the same keys then read, recall and write on PostgreSQL", async () => {
    const ops = (await ann.post("/v1/topics", { name: "Ops", hub_id: hub })).body.data;
    const runbooks = (await ann.post("/v1/topics", { name: "Runbooks", hub_id: hub, parent_id: ops.id })).body.data;
    const contents = [
      "# Backups\n\nThe orion database is backed up nightly at 02:00 UTC to cold storage; a restore takes twenty minutes.",
      "# Deploys\n\nThe web tier is deployed blue-green on Tuesdays after the standup.",
      "# On-call\n\nThe on-call engineer rotates every Monday at 09:00.",
    ];
    const ids: string[] = [];
    for (const content of contents) {
      const res = await bob.post("/v1/memories", { content, topic_id: runbooks.id }, { headers: { "x-hub-id": hub } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
    for (const id of ids) await waitProcessed(h.db, bob, id);
    expect((await ann.post(`/v1/hubs/${hub}/invites`, { role: "viewer", email: "carl@example.test" })).status).toBe(201);
    const question = { query: "when is the orion database backed up?", hub_ids: [hub] };
    const before = (await ann.post("/v1/recall", question)).body.data.memories.map((m: any) => [m.id, m.relevance_score]);
    expect(before[0][0]).toBe(ids[0]);
    const topicsBefore = (await ann.get(`/v1/topics?hub_id=${hub}`)).body.data;
    await flushAccess();
    await flushUsage();
    stopBackgroundProcessing();

    const url = await newTarget();
    const indexes = async () => {
      const database = await openDatabase({ url, migrate: false });
      try {
        return (await database.sql.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1`)).map((r) => r.def);
      } finally {
        await database.close();
      }
    };
    const indexesBefore = await indexes();
    const copied = await copyToPostgres(h.database.sql, url);
    // The secondary indexes dropped for the copy are all back, as the migrations made them.
    expect(await indexes()).toEqual(indexesBefore);
    expect(indexesBefore.some((def) => def.includes("USING hnsw"))).toBe(true);
    const rows = Object.fromEntries(copied.map((r) => [r.table, r.rows]));
    expect(rows).toMatchObject({ users: 2, hubs: 3, hub_members: 4, topics: 2, memories: 3, invites: 1 });
    expect(rows.chunks).toBeGreaterThanOrEqual(3);
    expect(rows.events).toBeGreaterThan(0);
    // Parents before children: the order the foreign keys need.
    const order = copied.map((r) => r.table);
    expect(order.indexOf("users")).toBeLessThan(order.indexOf("hubs"));
    expect(order.indexOf("topics")).toBeLessThan(order.indexOf("memories"));
    expect(order.indexOf("memories")).toBeLessThan(order.indexOf("chunks"));

    target = await openDatabase({ url });
    setDatabase(target);
    expect((await ann.get("/v1/memories?limit=100")).body.data.memories.map((m: any) => m.id).sort()).toEqual([...ids].sort());
    expect((await ann.get(`/v1/topics?hub_id=${hub}`)).body.data).toEqual(topicsBefore);
    expect((await ann.get(`/v1/hubs/${hub}/invites`)).body.data).toHaveLength(1);
    const after = (await ann.post("/v1/recall", question)).body.data.memories.map((m: any) => [m.id, m.relevance_score]);
    expect(after).toEqual(before);
    // Writing goes on: the event sequence continues after the copied events.
    const max = (await target.sql.query<{ max: string }>(`SELECT max(seq)::text AS max FROM events`))[0]!.max;
    const pushed = await ann.post("/v1/memories", { content: "Written on PostgreSQL after the copy." });
    expect(pushed.status, pushed.text).toBe(201);
    const seq = (await target.sql.query<{ seq: string }>(`SELECT seq::text AS seq FROM events WHERE entity_id = $1`, [pushed.body.data.id]))[0]!.seq;
    expect(BigInt(seq)).toBeGreaterThan(BigInt(max));

    // A second copy into the same (no longer empty) database is refused and changes nothing.
    await expect(copyToPostgres(h.database.sql, url)).rejects.toThrow("the target database is not empty");
  });

  it("a copy that fails part-way leaves the target empty", async () => {
    const url = await newTarget();
    const broken = await openDatabase({ url, migrate: false });
    try {
      await broken.sql.exec(`ALTER TABLE chunks ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`);
    } finally {
      await broken.close();
    }
    await expect(copyToPostgres(h.database.sql, url)).rejects.toThrow(/refuse_all/);
    const check = await openDatabase({ url, migrate: false });
    try {
      const counts = await check.sql.query<{ users: number; memories: number }>(
        `SELECT (SELECT count(*) FROM users)::int AS users, (SELECT count(*) FROM memories)::int AS memories`,
      );
      expect(counts).toEqual([{ users: 0, memories: 0 }]);
    } finally {
      await check.close();
    }
  });

  it("bounds each batch by bytes as well as rows: large memories go a few per statement, so no batch outgrows a string", async () => {
    // 500 memories of 3 MiB made one JSON string past V8's ~512 MiB limit; here the cap is 8 KiB and the memories ~3 KB.
    setDatabase(h.database); // the embedded source again (the first test moved the API onto its copy)
    for (let i = 0; i < 8; i++) {
      const res = await bob.post("/v1/memories", { content: `# Log ${i}\n\n${`Shipment ${i} left the depot on time and was signed for. `.repeat(30)}` }, { headers: { "x-hub-id": hub } });
      expect(res.status, res.text).toBe(201);
    }
    const url = await newTarget();
    const copied = await copyToPostgres(h.database.sql, url, { batchBytes: 8 * 1024 });
    const check = await openDatabase({ url, migrate: false });
    try {
      // Each INSERT of the one copy transaction has its own command id (cmin): one per batch.
      const batches = await check.sql.query<{ rows: number; bytes: number }>(
        `SELECT count(*)::int AS rows, sum(octet_length(row_to_json(m)::text))::int AS bytes FROM memories m GROUP BY cmin::text`,
      );
      expect(batches.reduce((sum, b) => sum + b.rows, 0)).toBe(copied.find((r) => r.table === "memories")!.rows);
      expect(batches.length).toBeGreaterThanOrEqual(4);
      for (const batch of batches) if (batch.rows > 1) expect(batch.bytes).toBeLessThanOrEqual(8 * 1024);
    } finally {
      await check.close();
    }
  });

  it("an ANALYZE that fails after the commit is reported as a warning: the copied rows are in", async () => {
    const url = await newTarget();
    const prepared = await openDatabase({ url, migrate: false });
    try {
      // Statistics on an expression are computed by ANALYZE only: nothing in the copy itself calls it.
      await prepared.sql.exec(`CREATE FUNCTION refuse_to_analyse(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused to analyse'; END $$`);
      await prepared.sql.exec(`CREATE STATISTICS refuse_stats ON (refuse_to_analyse(name)) FROM users`);
    } finally {
      await prepared.close();
    }
    const warnings: string[] = [];
    const copied = await copyToPostgres(h.database.sql, url, { onWarning: (message) => warnings.push(message) });
    expect(copied.find((r) => r.table === "users")!.rows).toBe(2);
    expect(warnings).toEqual([expect.stringMatching(/^the rows are copied, but ANALYZE failed \(refused to analyse\)/)]);
    const check = await openDatabase({ url, migrate: false });
    try {
      expect(await check.sql.query(`SELECT count(*)::int AS users FROM users`)).toEqual([{ users: 2 }]);
    } finally {
      await check.close();
    }
  });

  it("a connection to the target cut mid-copy fails the copy with a message, not an uncaught exception", async () => {
    const url = await newTarget();
    const killer = new pg.Client({ connectionString: url });
    await killer.connect();
    let cut: Promise<unknown> | undefined;
    try {
      const copy = copyToPostgres(h.database.sql, url, {
        onTable: () => {
          cut ??= killer.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
        },
      });
      await expect(copy).rejects.toThrow(/^the connection to the target database was lost/);
      await cut;
      // Nothing committed: the target is as empty as it was.
      expect((await killer.query(`SELECT count(*)::int AS users FROM users`)).rows).toEqual([{ users: 0 }]);
    } finally {
      await killer.end();
    }
  });

  /** Copies `source` into a new target whose connection is cut while its COMMIT waits; the error and the target's URL. */
  async function copyCutAtCommit(source: Database): Promise<{ error: Error; url: string }> {
    const url = await newTarget();
    const killer = new pg.Client({ connectionString: url });
    await killer.connect();
    try {
      // The COMMIT waits for a lock this connection holds: a deferred trigger runs at commit, armed by the
      // copy's first index rebuild (an event trigger), so the copy's backend can be cut during its COMMIT.
      await killer.query(`
        CREATE SCHEMA gate;
        CREATE TABLE gate.armed (n int);
        CREATE FUNCTION gate.hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7007); RETURN NULL; END $$;
        CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON gate.armed DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gate.hold();
        CREATE FUNCTION gate.arm() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO gate.armed VALUES (1); END $$;
        CREATE EVENT TRIGGER arm_commit_gate ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION gate.arm();
        SELECT pg_advisory_lock(7007);`);
      const outcome = copyToPostgres(source.sql, url).then(
        () => undefined,
        (error: Error) => error,
      );
      for (let waited = 0; ; waited += 20) {
        const { rows } = await killer.query<{ pid: number; query: string }>(
          `SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event = 'advisory'`,
        );
        if (rows.length) {
          expect(rows[0]!.query).toBe("COMMIT");
          await killer.query(`SELECT pg_terminate_backend($1)`, [rows[0]!.pid]);
          break;
        }
        if (waited > 30_000) throw new Error("the copy never reached its COMMIT");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const error = await outcome;
      expect(error).toBeInstanceOf(Error);
      return { error: error!, url };
    } finally {
      await killer.end();
    }
  }

  /** The check the message names, run on the source and the target: what a complete copy finds, and what the target holds. */
  async function namedCheck(message: string, source: Database, url: string) {
    const named = /SELECT count\(\*\) FROM (\w+) there finds (\d+)/.exec(message);
    expect(named, message).not.toBeNull();
    const [, table, expected] = named!;
    const count = `SELECT count(*)::int AS n FROM ${table}`;
    const inTarget = await openDatabase({ url, migrate: false });
    try {
      return { expected: Number(expected), source: (await source.sql.query<{ n: number }>(count))[0]!.n, target: (await inTarget.sql.query<{ n: number }>(count))[0]!.n };
    } finally {
      await inTarget.close();
    }
  }

  it("a connection lost during the COMMIT says the copy's outcome is unknown and how to check, not that nothing was copied", async () => {
    const { error, url } = await copyCutAtCommit(h.database);
    expect(error.message).not.toMatch(/nothing was copied/);
    expect(error.message).toMatch(/^the connection to the target database was lost during its COMMIT .*whether the copy was committed is unknown/);
    // The backend ended before its COMMIT went through: the named check finds the rolled-back side.
    const check = await namedCheck(error.message, h.database, url);
    expect(check.expected).toBeGreaterThan(0);
    expect(check).toEqual({ expected: check.source, source: check.source, target: 0 });
  });

  // The check was "count the target's users": a fresh install has none, so a committed copy of it looked rolled back.
  it("the outcome check of a copy from an install with no users names a table the copy fills", async () => {
    const fresh = await openDatabase({ dataDir: "memory://", template: templateSnapshot() });
    try {
      // What a first start leaves before anyone signs up: the signing secret.
      await fresh.sql.exec(`INSERT INTO settings (key, value) VALUES ('signing_secret', 'fresh-install-secret')`);
      const { error, url } = await copyCutAtCommit(fresh);
      expect(error.message).toMatch(/whether the copy was committed is unknown/);
      const check = await namedCheck(error.message, fresh, url);
      expect(check).toEqual({ expected: 1, source: 1, target: 0 });
    } finally {
      await fresh.close();
    }
  });

  it("npm run db:copy-to-postgres takes the Unix-socket URL docs/operations.md recommends on the same host", async ({ skip }) => {
    const url = new URL(await newTarget());
    const probe = await openDatabase({ url: url.toString(), migrate: false });
    let socketDir: string | undefined;
    let port: string;
    try {
      socketDir = (await probe.sql.query<{ d: string }>(`SELECT current_setting('unix_socket_directories') AS d`))[0]!.d.split(",")[0]?.trim();
      port = (await probe.sql.query<{ port: string }>(`SELECT current_setting('port') AS port`))[0]!.port;
    } finally {
      await probe.close();
    }
    // A server with no socket (or on another host) cannot be reached this way: reported as skipped, not passed.
    if (!socketDir || !url.hostname.match(/^(127\.0\.0\.1|localhost|::1|\[::1\])$/)) return skip("the test server has no Unix socket on this host");
    // `postgres://engram@/engram?host=/var/run/postgresql`: a user and no host name.
    const socketUrl = `postgres://${url.username}@${url.pathname}?host=${encodeURIComponent(socketDir)}&port=${port}`;
    const dataDir = mkdtempSync(path.join(tmpdir(), "engram-copy-socket-"));
    try {
      const source = await openDatabase({ dataDir: path.join(dataDir, "pglite"), template: templateSnapshot() });
      await source.close();
      const root = path.resolve(import.meta.dirname, "..");
      const child = spawn(process.execPath, [path.join(root, "node_modules", "tsx", "dist", "cli.mjs"), path.join(root, "scripts", "copy-to-postgres.ts"), socketUrl], {
        cwd: root,
        env: { ...process.env, ENGRAM_DATA_DIR: dataDir, DATABASE_URL: "" },
      });
      let output = "";
      child.stdout.on("data", (chunk) => (output += chunk));
      child.stderr.on("data", (chunk) => (output += chunk));
      const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
      expect(code, output).toBe(0);
      expect(output).toMatch(/copied \d+ rows in \d+ tables/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

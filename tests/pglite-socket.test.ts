import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PGlite } from "@electric-sql/pglite";
import { vector } from "@electric-sql/pglite-pgvector";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { indexMemories } from "./recall-helpers.ts";

/**
 * The DATABASE_URL code path (node-postgres and @prisma/adapter-pg speaking the wire protocol),
 * against PGlite served over a local socket and migrated from scratch by the app itself. This is
 * PGlite behind a socket, not a PostgreSQL server: it proves the driver path, not PostgreSQL's own
 * behaviour (locking, concurrency); a real server is the production issue's test.
 */
let pg: PGlite;
let server: PGLiteSocketServer;
let h: Harness;
let ann: Client;
let bob: Client;

beforeAll(async () => {
  pg = await PGlite.create("memory://", { extensions: { vector } });
  // A random port below the range the kernel hands out to outgoing connections; taken: another.
  let port = 0;
  for (let attempt = 0; ; attempt++) {
    port = 20000 + Math.floor(Math.random() * 12000);
    server = new PGLiteSocketServer({ db: pg, port, host: "127.0.0.1", maxConnections: 4 });
    try {
      await server.start();
      break;
    } catch (error) {
      if (attempt >= 9 || (error as { code?: string }).code !== "EADDRINUSE") throw error;
    }
  }
  process.env.ENGRAM_DB_POOL_SIZE = "1";
  h = await createHarness({ url: `postgresql://postgres:postgres@127.0.0.1:${port}/postgres?sslmode=disable` });
  ann = await h.user("Ann");
  bob = await h.user("Bob");
});
afterAll(async () => {
  await h?.close();
  await server?.stop();
  await pg?.close();
  delete process.env.ENGRAM_DB_POOL_SIZE;
});

describe("the DATABASE_URL driver path, against PGlite behind a socket", () => {
  test("health reports postgres and migrations are recorded", async () => {
    const res = await h.anonymous.get("/v1/health");
    expect(res.body.data.database).toBe("postgres");
    const rows = await h.database.sql.query<{ migration_name: string }>(`SELECT migration_name FROM _prisma_migrations`);
    expect(rows.length).toBeGreaterThan(0);
  });

  test("the memories API works end to end", async () => {
    const created = await ann.post("/v1/memories", { content: "# Wire\n\nover a socket", tags: ["net"], source_path: "wire.md" });
    expect(created.status).toBe(201);
    const again = await ann.post("/v1/memories", { content: "# Wire\n\nchanged", source_path: "wire.md" });
    expect(again.body.data).toMatchObject({ id: created.body.data.id, version: 2 });
    const got = await ann.get(`/v1/memories/${created.body.data.id}`);
    expect(got.body.data).toMatchObject({ content: "# Wire\n\nchanged", access_count: 1, tags: ["net"] });
    for (let i = 0; i < 5; i++) await ann.post("/v1/memories", { content: `note ${i}` });
    const page1 = await ann.get("/v1/memories?limit=4");
    const page2 = await ann.get(`/v1/memories?limit=4&cursor=${encodeURIComponent(page1.body.data.next_cursor)}`);
    expect(page1.body.data.total).toBe(6);
    expect([...page1.body.data.memories, ...page2.body.data.memories].map((m: { id: string }) => m.id)).toHaveLength(6);
    expect((await bob.get(`/v1/memories/${created.body.data.id}`)).status).toBe(404);
    const patched = await ann.patch(`/v1/memories/${created.body.data.id}`, { state: "archived", title: "Archived" });
    expect(patched.body.data).toMatchObject({ state: "archived", title: "Archived" });
    const del = await ann.post("/v1/memories/batch-delete", { ids: [created.body.data.id] });
    expect(del.body.data.deleted).toBe(1);
  });

  test("recall works through node-postgres: indexed and just-pushed memories, entities, filters", async () => {
    const push = async (content: string, extra: Record<string, unknown> = {}) => (await ann.post("/v1/memories", { content, ...extra })).body.data.id as string;
    const stripe = await push("# Rotating the Stripe key\n\nRotate STRIPE_SECRET_KEY in the vault, then redeploy the billing worker.", { kind: "procedural" });
    const twilio = await push("# Rotating the Twilio key\n\nRotate the Twilio auth token in the vault every quarter.", { kind: "procedural" });
    await indexMemories(h.database.prisma, [stripe, twilio]);
    const fresh = await push("The wire protocol smoke test uses pglite-socket on a random port.");

    const res = await ann.post("/v1/recall", { query: "how do I rotate the Stripe key?" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { memories, query_metadata } = res.body.data;
    expect(memories[0]).toMatchObject({ id: stripe, kind: "procedural", heading_chain: "Rotating the Stripe key" });
    expect(typeof memories[0].relevance_score).toBe("number");
    // The near miss (another key's rotation) may follow, never lead: recall's floor drops only what is
    // unrelated (docs/recall.md, "Calibration and floor").
    const near = memories.findIndex((m: { id: string }) => m.id === twilio);
    if (near !== -1) expect(memories[near].relevance_score).toBeLessThan(memories[0].relevance_score);
    expect(query_metadata.total_candidates).toBeGreaterThan(0);

    const unchunked = await ann.post("/v1/recall", { query: "pglite-socket smoke test" });
    expect(unchunked.body.data.memories[0]).toMatchObject({ id: fresh });
    const filtered = await ann.post("/v1/recall", { query: "rotate the key in the vault", kind: "episodic" });
    expect(filtered.body.data.memories).toEqual([]);
  });

  test("errors map the same way (unique violations, validation)", async () => {
    const key = await ann.post("/v1/auth/api-keys", { name: "wire" });
    expect(key.status).toBe(201);
    expect((await ann.post("/v1/memories", { content: "" })).status).toBe(400);
    const vec = await h.database.sql.query<{ d: number }>(`SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector AS d`);
    expect(Number(vec[0]!.d)).toBeCloseTo(1);
  });
});

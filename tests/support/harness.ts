import { readFileSync } from "node:fs";
import { inject } from "vitest";
import { openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { newId } from "@/lib/ids.ts";
import { stoppedJobsEnded } from "@/lib/processing/start-background-processing.ts";
import { flushAccess } from "@/lib/recall/record-access.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { dispatch } from "./router.ts";
import { createTestDatabase } from "./postgres.ts";

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  /** Send this exact body text instead of JSON-encoding `body`. */
  raw?: string;
}

const BASE = "http://engram.test";

/** Every bucket a different (high) limit, so X-RateLimit-Limit tells which bucket a route used. */
export const HARNESS_LIMITS = { regular: 1_000_000, heavy: 200_000, light: 50_000 } as const;

/** An instant 30 s into a rate-limit window (see frozenLimiter). */
const MID_WINDOW = Date.parse("2026-01-01T00:00:30Z");

/**
 * A limiter with small caps for tests that spend a budget and expect the next call refused. Its clock
 * stands still mid-window: with the real clock such a test fails when it straddles a minute boundary,
 * where the sliding estimate counts only part of the previous window's calls.
 */
export function frozenLimiter(caps: ConstructorParameters<typeof MemoryRateLimiter>[0]): MemoryRateLimiter {
  return new MemoryRateLimiter(caps, () => MID_WINDOW);
}

export async function call(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<ApiResponse> {
  const headers = new Headers(options.headers);
  let payload: string | undefined = options.raw;
  if (payload === undefined && body !== undefined) payload = JSON.stringify(body);
  if (payload !== undefined && !headers.has("content-type")) headers.set("content-type", "application/json");
  const res = await dispatch(new Request(`${BASE}${path}`, { method, headers, body: payload }));
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export interface Client {
  id: string;
  email: string;
  name: string;
  key: string;
  personalHubId: string;
  get(path: string, options?: RequestOptions): Promise<ApiResponse>;
  post(path: string, body?: unknown, options?: RequestOptions): Promise<ApiResponse>;
  patch(path: string, body?: unknown, options?: RequestOptions): Promise<ApiResponse>;
  put(path: string, body?: unknown, options?: RequestOptions): Promise<ApiResponse>;
  delete(path: string, options?: RequestOptions): Promise<ApiResponse>;
}

export function clientFor(key: string | undefined) {
  const auth = (options: RequestOptions = {}) =>
    key === undefined ? options : { ...options, headers: { authorization: `Bearer ${key}`, ...options.headers } };
  return {
    get: (path: string, options?: RequestOptions) => call("GET", path, undefined, auth(options)),
    post: (path: string, body?: unknown, options?: RequestOptions) => call("POST", path, body, auth(options)),
    patch: (path: string, body?: unknown, options?: RequestOptions) => call("PATCH", path, body, auth(options)),
    put: (path: string, body?: unknown, options?: RequestOptions) => call("PUT", path, body, auth(options)),
    delete: (path: string, options?: RequestOptions) => call("DELETE", path, undefined, auth(options)),
  };
}

/**
 * Waits until a memory's background processing has finished, then reads it once through the API.
 * The waiting reads the row's status straight from the database: polling GET /v1/memories/:id would
 * count every poll as an access and change access_count while waiting.
 */
export async function waitProcessed(db: Database["prisma"], client: { get: Client["get"] }, id: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await db.memory.findUnique({ where: { id }, select: { processingStatus: true } });
    if (row && ["done", "failed"].includes(row.processingStatus)) break;
    if (Date.now() > deadline) throw new Error(`memory ${id} still ${row?.processingStatus ?? "missing"}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return (await client.get(`/v1/memories/${id}`)).body.data;
}

export interface Harness {
  database: Database;
  /** The database's postgres:// URL (a PostgreSQL test database or `options.url`); undefined on PGlite. */
  url?: string;
  db: Database["prisma"];
  user(name: string): Promise<Client>;
  /** A team hub owned by `owner` with the given members, written straight to the database. */
  teamHub(owner: Client, members?: [Client, "admin" | "contributor" | "viewer"][], settings?: { contributorDeletePolicy?: string }): Promise<string>;
  /** Requests with no credential unless the options add one. */
  anonymous: ReturnType<typeof clientFor>;
  close(): Promise<void>;
}

let template: Blob | undefined;

/** A fresh, migrated embedded database snapshot (PGlite data directory). */
export function templateSnapshot(): Blob {
  template ??= new Blob([readFileSync(inject("dbTemplate"))]);
  return template;
}

/** The PostgreSQL server and template of `npm run test:postgres`; undefined under `npm test` (PGlite). */
export function testPostgres() {
  return inject("postgres");
}

/**
 * A fresh, migrated test database: an in-memory PGlite from the snapshot under `npm test`, its own
 * PostgreSQL database (a copy of the migrated template) under `npm run test:postgres`. Its close()
 * also drops a PostgreSQL copy. `migrate: false` skips the (no-op) check for pending migrations.
 */
export async function openTestDatabase(options: { migrate?: boolean } = {}): Promise<Database & { url?: string }> {
  const postgres = testPostgres();
  if (!postgres) return openDatabase({ dataDir: "memory://", template: templateSnapshot(), migrate: options.migrate });
  const copy = await createTestDatabase(postgres);
  try {
    const database = await openDatabase({ url: copy.url, migrate: options.migrate });
    return {
      ...database,
      url: copy.url,
      async close() {
        await database.close();
        await copy.drop();
      },
    };
  } catch (error) {
    await copy.drop();
    throw error;
  }
}

/**
 * A fresh, migrated test database (see openTestDatabase) installed as the app's database, plus
 * helpers to call the API. With `url`, the app talks to that PostgreSQL server instead; with
 * `embedded`, to an in-memory embedded database even under `npm run test:postgres`; with `dataDir`, to an
 * embedded database in that directory (from the snapshot), which a test can open again after a stop closed it.
 */
export async function createHarness(options: { url?: string; embedded?: boolean; dataDir?: string } = {}): Promise<Harness> {
  const database = options.url
    ? await openDatabase({ url: options.url })
    : options.embedded || options.dataDir
      ? await openDatabase({ dataDir: options.dataDir ?? "memory://", template: templateSnapshot() })
      : await openTestDatabase();
  setDatabase(database);
  setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
  let counter = 0;
  return {
    database,
    url: options.url ?? ("url" in database ? (database.url as string | undefined) : undefined),
    db: database.prisma,
    async user(name: string) {
      counter += 1;
      const email = `${name.toLowerCase()}-${counter}@example.test`;
      const now = new Date();
      const { user, hub, extra } = await createUser(database.prisma, { email, name }, now, (tx, created) =>
        insertApiKey(tx, created.user.id, "test", now),
      );
      return { id: user.id, email, name, key: extra.key, personalHubId: hub.id, ...clientFor(extra.key) };
    },
    async teamHub(owner, members = [], settings = {}) {
      counter += 1;
      const hub = await database.prisma.hub.create({
        data: {
          id: newId(),
          name: `Team ${counter}`,
          slug: `team-${counter}-${Date.now().toString(36)}`,
          hubType: "team",
          ownerId: owner.id,
          contributorDeletePolicy: settings.contributorDeletePolicy ?? "own",
          members: { create: [{ userId: owner.id, role: "owner" }, ...members.map(([m, role]) => ({ userId: m.id, role }))] },
        },
      });
      return hub.id;
    },
    anonymous: clientFor(undefined),
    async close() {
      // Jobs of a runner the test stopped may still be in a statement: they end before the database goes.
      await stoppedJobsEnded();
      // Recall writes access counts after responding; let them land before the database goes away.
      await flushAccess();
      await flushUsage();
      setDatabase(undefined);
      await database.close();
    },
  };
}

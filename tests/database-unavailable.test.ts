import { afterAll, beforeAll, expect, it } from "vitest";
import { openDatabase, setDatabase, type Database } from "@/lib/db/database.ts";
import { isDatabaseUnavailable, isTransactionExpired } from "@/lib/db/errors.ts";
import { dispatch, routerFor } from "./support/router.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";

/**
 * A PostgreSQL server that is down (restart, failover) is a 503 with Retry-After, not a 500: the fault
 * campaign (bench/faults.mjs) restarts the database under load and clients must know to retry. Nothing
 * listens on 127.0.0.1:3149 (this branch's port range), so the driver's own "not reachable" error is real.
 */
let dead: Database;
beforeAll(async () => {
  dead = await openDatabase({ url: "postgres://postgres@127.0.0.1:3149/engram", migrate: false });
  setDatabase(dead);
});
afterAll(async () => {
  setDatabase(undefined);
  await dead.close().catch(() => undefined);
});

it("answers 503 unavailable with Retry-After when the database cannot be reached", async () => {
  const res = await dispatch(new Request("http://engram.test/v1/memories", { headers: { authorization: "Bearer egk_test_not_checked_yet" } }));
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe("2");
  const body = await res.json();
  expect(body.error.code).toBe("unavailable");
});

it("answers 503 with Retry-After too when the database cannot even be opened (first request, or a server stopping)", async () => {
  const before = process.env.DATABASE_URL;
  process.env.DATABASE_URL = "postgres://postgres@127.0.0.1:3149/engram";
  setDatabase(undefined);
  try {
    const res = await dispatch(new Request("http://engram.test/v1/memories", { headers: { authorization: "Bearer egk_test_not_checked_yet" } }));
    expect(res.status).toBe(503);
    expect((await res.json()).error.code).toBe("unavailable");
    expect(res.headers.get("retry-after")).toBe("2");
  } finally {
    if (before === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = before;
    setDatabase(dead);
  }
});

it("answers the OAuth endpoints' clients 503 temporarily_unavailable with Retry-After, in RFC 6749's shape, not a 500 server_error", async () => {
  const oauth = routerFor(["oauth"]);
  const form = { "content-type": "application/x-www-form-urlencoded" };
  for (const [path, body] of [
    ["/oauth/token", "grant_type=refresh_token&refresh_token=ert_x&client_id=c"],
    ["/oauth/register", JSON.stringify({ redirect_uris: ["https://c.example/cb"] })],
  ] as const) {
    const res = await oauth(new Request(`http://engram.test${path}`, { method: "POST", headers: path === "/oauth/token" ? form : { "content-type": "application/json" }, body }));
    expect(res.status, path).toBe(503);
    expect(res.headers.get("retry-after")).toBe("2");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.json()).toEqual({ error: "temporarily_unavailable", error_description: "The database is not available; try again shortly" });
  }
});

it("answers an MCP client 503 with a JSON-RPC error (REST's code in error.data), not the REST envelope", async () => {
  const call = { jsonrpc: "2.0", id: 7, method: "tools/list" };
  const res = await mcpPost(
    new Request("http://engram.test/mcp", {
      method: "POST",
      headers: { authorization: "Bearer egk_test_not_checked_yet", "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify(call),
    }),
    { params: Promise.resolve({}) },
  );
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe("2");
  expect(res.headers.get("access-control-allow-origin")).toBe("*");
  // The credential was never read, so neither was the body: the id is unknown.
  expect(await res.json()).toEqual({
    jsonrpc: "2.0",
    id: null,
    error: { code: -32000, message: "The database is not available; try again shortly", data: { code: "unavailable" } },
  });
});

it("tells a lost connection from a request's own database error", async () => {
  const unreachable = await dead.prisma.user.count().catch((error: unknown) => error);
  expect(isDatabaseUnavailable(unreachable)).toBe(true);
  expect(isDatabaseUnavailable(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
  expect(isDatabaseUnavailable(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }))).toBe(true);
  expect(isDatabaseUnavailable(new Error("Connection terminated unexpectedly"))).toBe(true);
  // A pooled connection dropped by a database restart, used again (seen as a 500 in bench:faults), as Prisma reports it.
  expect(isDatabaseUnavailable(Object.assign(new Error("Client has encountered a connection error and is not queryable"), { clientVersion: "7.10.1" }))).toBe(true);
  expect(isDatabaseUnavailable(new Error("relation \"memories\" does not exist"))).toBe(false);
});

it("tells an expired (timed-out) transaction from other transaction errors", () => {
  // The shape Prisma 7 gives when a transaction outlives its timeout (seen in bench:faults under load).
  const expired = Object.assign(new Error("Transaction API error: A query cannot be executed on an expired transaction."), { code: "P2028", meta: { operation: "query", timeout: 5000, timeTaken: 6092 } });
  expect(isTransactionExpired(expired)).toBe(true);
  expect(isTransactionExpired(Object.assign(new Error("Transaction already closed"), { code: "P2028", meta: {} }))).toBe(false);
});

it("refuses a pool size that is not a positive whole number at open, rather than a pool of NaN connections (no bound at all)", async () => {
  for (const raw of ["ten", "0", "2.5"]) {
    process.env.ENGRAM_DB_POOL_SIZE = raw;
    try {
      await expect(openDatabase({ url: "postgres://postgres@127.0.0.1:3149/engram", migrate: false }), raw).rejects.toThrow(`ENGRAM_DB_POOL_SIZE must be a positive integer, got "${raw}"`);
    } finally {
      delete process.env.ENGRAM_DB_POOL_SIZE;
    }
  }
});

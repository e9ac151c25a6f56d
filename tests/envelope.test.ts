import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { errorResponse } from "@/lib/api/envelope.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { setDatabase } from "@/lib/db/database.ts";
import { listRouteFiles } from "./support/router.ts";
import { clientFor, createHarness, frozenLimiter, openTestDatabase, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

describe("envelope and headers", () => {
  test("success carries data, no-store and a request id; a client's request id is echoed", async () => {
    const res = await ann.get("/v1/auth/me", { headers: { "x-request-id": "req-123" } });
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("x-request-id")).toBe("req-123");
    expect(Object.keys(res.body)).toEqual(["data"]);
    const generated = await ann.get("/v1/auth/me", { headers: { "x-request-id": "bad id with spaces" } });
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("every invalid_request lists details.issues, even one raised without them", async () => {
    const bare = await errorResponse(new ApiError("invalid_request", "Only contradiction reviews are resolved")).json();
    expect(bare.error.details).toEqual({ issues: [{ path: "", message: "Only contradiction reviews are resolved" }] });
    const kept = await errorResponse(new ApiError("invalid_request", "bad", { issues: [{ path: "name", message: "required" }], extra: 1 })).json();
    expect(kept.error.details).toEqual({ issues: [{ path: "name", message: "required" }], extra: 1 });
    const other = await errorResponse(new ApiError("conflict", "taken")).json();
    expect(other.error.details).toBeUndefined();
    // Through a route: more hubs than a key may name.
    const hubs = Array.from({ length: 21 }, (_, i) => `00000000-0000-7000-8000-${String(i).padStart(12, "0")}`);
    const tooMany = await ann.post("/v1/auth/api-keys", { name: "many", hub_ids: hubs });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.details.issues.length).toBeGreaterThan(0);
  });

  test("unknown /v1 paths are JSON not_found for every method", async () => {
    for (const method of ["get", "post", "patch", "delete"] as const) {
      const res = method === "get" || method === "delete" ? await ann[method]("/v1/does/not/exist") : await ann[method]("/v1/nothing", {});
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("not_found");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    }
    const echoed = await ann.get("/v1/does/not/exist", { headers: { "x-request-id": "req-404" } });
    expect(echoed.headers.get("x-request-id")).toBe("req-404");
    const root = await ann.get("/v1");
    expect(root.status).toBe(404);
    expect(root.body.error.code).toBe("not_found");
  });

  test("X-Hub-ID is parsed only by withAuth (routes and domain code use ctx.hubHeader)", async () => {
    const { readFileSync, readdirSync } = await import("node:fs");
    const { join } = await import("node:path");
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (/\.tsx?$/.test(entry.name) && path !== join("lib", "api", "with-auth.ts")) {
          if (/headers\.get\(\s*["'`]x-hub-id["'`]\s*\)/i.test(readFileSync(path, "utf8"))) offenders.push(path);
        }
      }
    };
    walk("app");
    walk("lib");
    expect(offenders).toEqual([]);
  });

  test("every route file answers unimplemented methods with a JSON 405", async () => {
    const { readFileSync } = await import("node:fs");
    for (const route of listRouteFiles()) {
      const source = readFileSync(route.file, "utf8");
      if (route.pattern.includes("[...")) continue;
      const mod = (await import(route.file)) as Record<string, unknown>;
      for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE"]) {
        expect(typeof mod[method], `${route.pattern} exports ${method}`).toBe("function");
      }
      expect(source, route.pattern).toMatch(/methodsNotAllowed\(/);
    }
    const res = await ann.put("/v1/memories", {});
    expect(res.status).toBe(405);
    expect(res.body.error.code).toBe("method_not_allowed");
    expect(res.headers.get("allow")).toBe("GET, POST");
  });

  test("OPTIONS names the methods a route really has, with the usual headers (Next's own answer named its 405s too)", async () => {
    const { readFileSync } = await import("node:fs");
    // What Next does with a route file's exports (an OPTIONS the file does not export is made up from them).
    const { autoImplementMethods } = (await import("next/dist/server/route-modules/app-route/helpers/auto-implement-methods.js")) as unknown as {
      autoImplementMethods: (handlers: Record<string, unknown>) => Record<string, (req: Request, ctx: unknown) => Promise<Response>>;
    };
    for (const route of listRouteFiles()) {
      if (route.pattern.includes("[...")) continue;
      const allowed = readFileSync(route.file, "utf8").match(/methodsNotAllowed\(([^)]*)\)/)![1]!.match(/[A-Z]+/g)!;
      const mod = (await import(route.file)) as Record<string, unknown>;
      const path = `http://engram.test${route.pattern.replace(/\[\w+\]/g, "x")}`;
      const res = await autoImplementMethods(mod).OPTIONS!(new Request(path, { method: "OPTIONS", headers: { "x-request-id": "req-options" } }), {
        params: Promise.resolve({}),
      });
      // The admin routes are 404 while no admin token is set, OPTIONS as much as POST.
      if (route.pattern === "/v1/admin/users" || route.pattern === "/v1/auth/impersonate") {
        expect(res.status, route.pattern).toBe(404);
        continue;
      }
      expect(res.status, route.pattern).toBe(204);
      const expected = [...allowed, ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"].join(", ");
      expect(res.headers.get("allow"), route.pattern).toBe(expected);
      expect(res.headers.get("x-request-id"), route.pattern).toBe("req-options");
      expect(res.headers.get("cache-control"), route.pattern).toBe("no-store");
    }
  });

  test("an unexpected failure is a generic 500 that leaks nothing", async () => {
    const broken = await openTestDatabase();
    await broken.close();
    setDatabase(broken);
    try {
      const res = await ann.get("/v1/memories");
      expect(res.status).toBe(500);
      expect(res.body.error.code).toBe("internal");
      expect(res.body.error.message).toMatch(/^Internal error \(request [0-9a-f-]+\)$/);
      expect(res.text).not.toMatch(/prisma|pglite|postgres|pool|stack|at \w+ \(/i);
    } finally {
      setDatabase(h.database);
    }
  });
});

describe("a unique index that a write runs into", () => {
  test("is 409 conflict with a message that names no column, index or value, not a 500", async () => {
    const uma = await h.user("Uma");
    const first = await uma.post("/v1/memories", { title: "Runbook", content: "The first runbook." });
    const second = await uma.post("/v1/memories", { title: "Checklist", content: "The second runbook." });
    expect([first.status, second.status]).toEqual([201, 201]);
    // A constraint no domain function checks first, as a race between a check and an insert leaves it
    // to the database: one title per hub, in Uma's hub only.
    await h.db.$executeRawUnsafe(`CREATE UNIQUE INDEX test_one_title_per_hub ON memories (hub_id, title) WHERE hub_id = '${uma.personalHubId}'`);
    try {
      const renamed = await uma.patch(`/v1/memories/${second.body.data.id}`, { title: "Runbook" });
      const pushed = await uma.post("/v1/memories", { title: "Runbook", content: "A third runbook." });
      for (const res of [renamed, pushed]) {
        expect(res.status, res.text).toBe(409);
        expect(res.body.error.code).toBe("conflict");
        expect(res.text).not.toMatch(/test_one_title_per_hub|hub_id|title|Runbook|unique|constraint|P2002|23505|prisma/i);
      }
      expect((await uma.get(`/v1/memories/${second.body.data.id}`)).body.data.title).toBe("Checklist");
    } finally {
      await h.db.$executeRawUnsafe(`DROP INDEX test_one_title_per_hub`);
    }
  });
});

describe("a unique violation that escapes to the envelope", () => {
  test("is logged as an error with the request id, the constraint and the stack (a deterministic bug must not pass for a client's conflict); the response has none of them", async () => {
    const una = await h.user("Una");
    await una.post("/v1/memories", { title: "Playbook", content: "The first playbook." });
    await h.db.$executeRawUnsafe(`CREATE UNIQUE INDEX test_one_playbook_per_hub ON memories (hub_id, title) WHERE hub_id = '${una.personalHubId}'`);
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const res = await una.post("/v1/memories", { title: "Playbook", content: "A second playbook." }, { headers: { "x-request-id": "req-unique-1" } });
      expect(res.status, res.text).toBe(409);
      expect(res.text).not.toMatch(/test_one_playbook_per_hub|    at /);
      const logged = errors.mock.calls.map((args) => args.map((arg) => (arg instanceof Error ? `${arg.message}\n${arg.stack}` : String(arg))).join(" "));
      const line = logged.find((text) => text.includes("req-unique-1"));
      expect(line, logged.join("\n---\n")).toBeDefined();
      expect(line).toContain("test_one_playbook_per_hub");
      expect(line).toMatch(/\n\s+at /);
    } finally {
      errors.mockRestore();
      await h.db.$executeRawUnsafe(`DROP INDEX test_one_playbook_per_hub`);
    }
  });
});

describe("rate limits", () => {
  test("headers on every limited response; 429 with Retry-After once the bucket is spent", async () => {
    let now = Date.parse("2026-01-01T00:00:30Z");
    setRateLimiter(new MemoryRateLimiter({ regular: 3, heavy: 1, light: 2 }, () => now));
    try {
      const first = await ann.get("/v1/memories");
      expect(first.headers.get("x-ratelimit-limit")).toBe("3");
      expect(first.headers.get("x-ratelimit-remaining")).toBe("2");
      expect(Number(first.headers.get("x-ratelimit-reset"))).toBe(Date.parse("2026-01-01T00:01:00Z") / 1000);
      await ann.get("/v1/memories");
      await ann.get("/v1/memories");
      const limited = await ann.get("/v1/memories");
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe("rate_limited");
      expect(limited.body.error.details).toMatchObject({ limit: 3, retry_after: expect.any(Number) });
      expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(limited.headers.get("x-ratelimit-remaining")).toBe("0");
      // Reads are regular (the spec's bucket for reads and metadata), account settings and inboxes included…
      for (const path of ["/v1/notifications", "/v1/settings", "/v1/usage", "/v1/usage/dreams"]) expect((await ann.get(path)).status, path).toBe(429);
      // …while whoami and the badge poll are light: other buckets and other users are independent
      expect((await ann.get("/v1/auth/me")).status).toBe(200);
      expect((await ann.get("/v1/notifications/summary")).status).toBe(200);
      const bob = await h.user("Bob");
      expect((await bob.get("/v1/memories")).status).toBe(200);
      expect(Number(limited.headers.get("retry-after"))).toBe(30);
      // still spent later in the same window; the next window frees it as the old one slides out
      now += 20_000;
      expect((await ann.get("/v1/memories")).status).toBe(429);
      now += 55_000;
      expect((await ann.get("/v1/memories")).status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1e6, heavy: 1e6, light: 1e6 }));
    }
  });

  test("the limit and the key's scope answer before the hub, though the hub is looked up beside them", async () => {
    const unknownHub = { headers: { "x-hub-id": "00000000-0000-7000-8000-000000000009" } };
    expect((await ann.post("/v1/memories", { content: "to nowhere" }, unknownHub)).status).toBe(404);
    const readKey = await ann.post("/v1/auth/api-keys", { name: "reader", scopes: ["read"] });
    const reader = clientFor(readKey.body.data.key);
    const refused = await reader.post("/v1/memories", { content: "to nowhere" }, unknownHub);
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toMatch(/read-only/);
    setRateLimiter(frozenLimiter({ regular: 1, heavy: 5, light: 5 }));
    try {
      expect((await ann.get("/v1/memories")).status).toBe(200);
      const limited = await ann.post("/v1/memories", { content: "to nowhere" }, unknownHub);
      expect(limited.status).toBe(429);
      expect(limited.body.error.code).toBe("rate_limited");
      // The hub lookup that ran beside the refused limit left nothing unhandled behind.
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1e6, heavy: 1e6, light: 1e6 }));
    }
  });

  test("public routes are limited per client address", async () => {
    setRateLimiter(frozenLimiter({ regular: 5, heavy: 5, light: 1 }));
    try {
      const a = { headers: { [SOCKET_ADDRESS_HEADER]: "10.0.0.1" } };
      expect((await h.anonymous.get("/v1/health", a)).status).toBe(200);
      expect((await h.anonymous.get("/v1/health", a)).status).toBe(429);
      expect((await h.anonymous.get("/v1/health", { headers: { [SOCKET_ADDRESS_HEADER]: "10.0.0.2" } })).status).toBe(200);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ regular: 1e6, heavy: 1e6, light: 1e6 }));
    }
  });
});

describe("request bodies", () => {
  test("a body nested absurdly deep is a 400 naming the field, not a stack overflow's 500", async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    const res = await ann.post("/v1/memories", undefined, { raw: `{"content":"deep","metadata":{"x":${deep}}}` });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.issues[0].path).toMatch(/^metadata\.x(\.0)*$/);
    // Ordinary nesting is untouched.
    const nested = await ann.post("/v1/memories", { content: "nested", metadata: { a: { b: [[{ c: [1, 2] }]] } } });
    expect(nested.status).toBe(201);
  });
});

describe("the instance's signing secret", () => {
  test("a database error while it is first read is not remembered: once the database answers, signing works again", async () => {
    const fresh = await createHarness();
    try {
      const bea = await fresh.user("Bea");
      for (const content of ["first note", "second note"]) expect((await bea.post("/v1/memories", { content })).status).toBe(201);
      // The database refuses for a moment (a restart, a failover) just as the secret is first needed.
      await fresh.database.sql.exec(`CREATE FUNCTION refuse_setting() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'starting up' USING ERRCODE = '57P03'; END $$;
        CREATE TRIGGER refuse_setting BEFORE INSERT OR UPDATE ON settings FOR EACH ROW EXECUTE FUNCTION refuse_setting();`);
      expect((await bea.get("/v1/memories?limit=1")).status).toBe(503);
      await fresh.database.sql.exec(`DROP TRIGGER refuse_setting ON settings`);
      const page = await bea.get("/v1/memories?limit=1");
      expect(page.status).toBe(200);
      expect(page.body.data.next_cursor).not.toBe("");
    } finally {
      await fresh.close();
      setDatabase(h.database);
    }
  });
});

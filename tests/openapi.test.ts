import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { openApiValidator } from "./support/openapi-validator.ts";
import { listRouteFiles } from "./support/router.ts";

type Json = Record<string, any>;
const doc = openApiDocument() as Json;
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** The methods a route file really serves: `export const GET = with…` or `export { x as GET }`, not methodsNotAllowed's 405s. */
export function servedMethods(source: string): string[] {
  const served = new Set<string>();
  for (const m of source.matchAll(/export\s+(?:const|async\s+function|function)\s+(GET|POST|PUT|PATCH|DELETE)\b/g)) served.add(m[1]!);
  for (const m of source.matchAll(/export\s*\{([^}]*)\}\s*;?/g)) {
    for (const part of m[1]!.split(",")) {
      const name = part.trim().split(/\s+as\s+/).pop()!.trim();
      if ((METHODS as readonly string[]).includes(name)) served.add(name);
    }
  }
  return [...served];
}

/** app/v1/hubs/[id]/invites → /v1/hubs/{id}/invites; a catch-all [...key] → {key}. */
function openApiPath(pattern: string): string {
  return pattern.replace(/\[\.\.\.(\w+)\]/g, "{$1}").replace(/\[(\w+)\]/g, "{$1}");
}

describe("the document covers the routes", () => {
  const routes = listRouteFiles().filter((route) => !route.pattern.includes("[[...")); // the JSON 404 catch-all

  it("lists every method every route file under app/v1 serves", () => {
    const missing: string[] = [];
    let served = 0;
    for (const route of routes) {
      for (const method of servedMethods(readFileSync(route.file, "utf8"))) {
        served += 1;
        if (!doc.paths[openApiPath(route.pattern)]?.[method.toLowerCase()]) missing.push(`${method} ${openApiPath(route.pattern)}`);
      }
    }
    expect(missing).toEqual([]);
    expect(served).toBeGreaterThan(80);
  });

  it("documents no operation that no route serves", () => {
    const served = new Set(
      routes.flatMap((route) => servedMethods(readFileSync(route.file, "utf8")).map((method) => `${method.toLowerCase()} ${openApiPath(route.pattern)}`)),
    );
    const stale = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item as Json).map((method) => `${method} ${path}`)).filter((op) => !served.has(op));
    expect(stale).toEqual([]);
  });

  it("tells a served method from a 405 stub", () => {
    const source = `export const GET = withAuth({}, f);\nexport const { POST, PUT } = methodsNotAllowed("GET");\nexport { notFound as DELETE };`;
    expect(servedMethods(source).sort()).toEqual(["DELETE", "GET"]);
  });

  it("is OpenAPI 3.1 whose schemas all compile as JSON Schema 2020-12, with the security schemes, envelope and pagination", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: "egk_…" });
    expect(doc.components.schemas.ErrorEnvelope.properties.error.properties.code.enum).toEqual(expect.arrayContaining(["invalid_request", "not_found", "rate_limited", "internal"]));
    expect(doc.components.parameters.limit.in).toBe("query");
    expect(doc.paths["/v1/memories"].get.parameters).toEqual(expect.arrayContaining([{ $ref: "#/components/parameters/cursor" }]));
    expect(doc.paths["/v1/health"].get.security).toEqual([]);
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ $id: "doc", components: doc.components, paths: doc.paths });
    let compiled = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item as Json)) {
        const escape = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");
        const at = `doc#/paths/${escape(path)}/${method}`;
        if (op.requestBody) compiled += Number(Boolean(ajv.compile({ $ref: `${at}/requestBody/content/application~1json/schema` })));
        for (const [status, response] of Object.entries(op.responses as Json)) {
          if (response.content?.["application/json"]) compiled += Number(Boolean(ajv.compile({ $ref: `${at}/responses/${status}/content/application~1json/schema` })));
        }
      }
    }
    expect(compiled).toBeGreaterThan(100);
  });

  it("publishes only patterns that compile without JavaScript's Unicode mode, as Python-based tools (Schemathesis) read them", () => {
    const patterns: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object") {
        for (const [key, value] of Object.entries(node)) {
          if (key === "pattern" && typeof value === "string") patterns.push(value);
          else walk(value);
        }
      }
    };
    walk(doc);
    expect(patterns.length).toBeGreaterThan(0);
    // A `\p{…}` property escape needs the u flag here and is unknown to Python's re (the fuzz run's
    // "No value can be generated" schema error).
    for (const pattern of patterns) {
      expect(pattern, pattern).not.toMatch(/\\[pP]\{/);
      expect(() => new RegExp(pattern), pattern).not.toThrow();
    }
  });
});

describe("responses match the document", () => {
  let h: Harness;
  let ann: Client;
  let bob: Client;
  let cat: Client;
  const validator = openApiValidator(doc);
  const seen = new Set<string>();

  /** Calls the route handler and checks the answer against the document. */
  async function call(client: Client | Harness["anonymous"], method: "get" | "post" | "patch" | "put" | "delete", template: string, values: Record<string, string> = {}, body?: unknown, headers?: Record<string, string>) {
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? ""));
    const [pathOnly] = template.split("?");
    const query = values.query ? `?${values.query}` : "";
    const res =
      method === "get" || method === "delete"
        ? await client[method](`${path}${query}`, { headers })
        : await client[method](`${path}${query}`, body, { headers });
    validator.check(method, pathOnly!, res);
    seen.add(`${method} ${pathOnly} ${res.status}`);
    return res;
  }

  beforeAll(async () => {
    h = await createHarness();
    ann = await h.user("Ann");
    bob = await h.user("Bob");
    cat = await h.user("Cat");
  });
  afterAll(async () => {
    await h?.close();
  });

  // The route serves the document itself, not an envelope: documented as `{ data: object }`, a client
  // generated from the document (or a contract test) failed on the one operation that describes it.
  it("GET /v1/openapi.json is documented as the plain document it serves", async () => {
    const res = await call(h.anonymous, "get", "/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ openapi: "3.1.0", paths: expect.any(Object) });
    expect(() => validator.check("get", "/v1/openapi.json", { ...res, body: { data: res.body } })).toThrow();
  });

  // GET /v1/memories lists only the X-Hub-ID hub when hub_id is absent (list-memories.ts), as the
  // operations flagged hubHeader do; the document did not name the header for it.
  it("GET /v1/memories documents X-Hub-ID, which narrows the list to that hub", async () => {
    const dee = await h.user("Dee");
    const teamHub = await h.teamHub(dee);
    const inTeam = (await dee.post("/v1/memories", { content: "Filed in the team hub." }, { headers: { "x-hub-id": teamHub } })).body.data.id as string;
    await dee.post("/v1/memories", { content: "Filed in the personal hub." });
    const listed = await call(dee, "get", "/v1/memories", {}, undefined, { "x-hub-id": teamHub });
    expect(listed.body.data.memories.map((m: Json) => m.id)).toEqual([inTeam]);
    // Named with what the list does without it (every readable hub), not the writes' "else the personal hub".
    expect(doc.paths["/v1/memories"].get.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: "X-Hub-ID", in: "header" })]));
  });

  it("system, account and API keys", async () => {
    expect((await call(h.anonymous, "get", "/v1/health")).status).toBe(200);
    expect((await call(ann, "get", "/v1/usage")).status).toBe(200);
    expect((await call(ann, "get", "/v1/auth/me")).status).toBe(200);
    expect((await call(ann, "get", "/v1/settings")).status).toBe(200);
    const created = await call(ann, "post", "/v1/auth/api-keys", {}, { name: "ci", scopes: ["read"], agent_name: "bot" });
    expect(created.status).toBe(201);
    expect(created.body.data.key).toMatch(/^egk_/);
    expect((await call(ann, "get", "/v1/auth/api-keys")).body.data.length).toBe(2);
    expect((await call(ann, "patch", "/v1/auth/api-keys/{id}", { id: created.body.data.id }, { agent_name: "" })).status).toBe(200);
    expect((await call(ann, "delete", "/v1/auth/api-keys/{id}", { id: created.body.data.id })).body.data.revoked).toBe(true);
    // memax login: the browser step redirects; the CLI's exchange and refresh answer in the envelope.
    expect((await call(h.anonymous, "get", "/v1/auth/github", { query: "redirect_uri=http%3A%2F%2Flocalhost%3A4000%2Fcallback" })).status).toBe(302);
    expect((await call(h.anonymous, "post", "/v1/auth/exchange", {}, { code: "eac_unknown" })).status).toBe(401);
    expect((await call(h.anonymous, "post", "/v1/auth/refresh", {}, { refresh_token: "ert_unknown" })).status).toBe(401);
    // Errors are the envelope with a documented code.
    expect((await call(h.anonymous, "get", "/v1/usage")).status).toBe(401);
    expect((await call(ann, "post", "/v1/auth/api-keys", {}, { name: "" })).status).toBe(400);
  });

  it("memories and recall", async () => {
    const pushed = await call(ann, "post", "/v1/memories", {}, {
      content: "# Deploys\n\nWe deploy the billing service with blue-green switches on Tuesdays.",
      tags: ["ops"],
      source_path: "docs/deploys.md",
      project_context: { repo: "engram" },
    });
    expect(pushed.status).toBe(201);
    const id = pushed.body.data.id as string;
    expect((await call(ann, "post", "/v1/memories", {}, { content: "# Deploys\n\nWe deploy the billing service with blue-green switches on Tuesdays.", source_path: "docs/deploys.md" })).status).toBe(200);
    await call(ann, "post", "/v1/memories", {}, { content: "Coffee beans are stored in the left cupboard.", kind: "semantic" });
    const list = await call(ann, "get", "/v1/memories", { query: "limit=1" });
    expect(list.body.data.has_more).toBe(true);
    await call(ann, "get", "/v1/memories", { query: `limit=1&cursor=${encodeURIComponent(list.body.data.next_cursor)}` });
    expect((await call(ann, "get", "/v1/memories", { query: "limit=zero" })).body.error.code).toBe("invalid_limit");
    expect((await call(ann, "get", "/v1/memories/{id}", { id })).body.data.content).toContain("blue-green");
    expect((await call(ann, "patch", "/v1/memories/{id}", { id }, { title: "Deploy days", tags: ["ops", "billing"] })).status).toBe(200);
    expect((await call(ann, "get", "/v1/memories/{id}/related", { id })).status).toBe(200);
    expect((await call(ann, "post", "/v1/memories/{id}/access", { id })).body.data.counted).toBe(false);
    const recalled = await call(ann, "post", "/v1/recall", {}, { query: "when do we deploy billing?", limit: 5 });
    expect(recalled.body.data.memories.map((m: Json) => m.id)).toContain(id);
    const searched = await call(ann, "get", "/v1/memories/search", { query: "q=billing%20deploys" });
    expect(searched.body.data.map((m: Json) => m.memory_id)).toContain(id);
    expect((await call(ann, "get", "/v1/memories/{id}", { id: "00000000-0000-4000-8000-000000000000" })).status).toBe(404);
    expect((await call(bob, "get", "/v1/memories/{id}", { id })).status).toBe(404);
    expect((await call(ann, "delete", "/v1/memories/{id}", { id })).body.data).toEqual({ id, deleted: true });
  });

  it("hubs, members and invites", async () => {
    const hub = await call(ann, "post", "/v1/hubs", {}, { name: "Platform" });
    expect(hub.status).toBe(201);
    const hubId = hub.body.data.id as string;
    expect((await call(ann, "get", "/v1/hubs")).body.data.length).toBe(2);
    expect((await call(ann, "patch", "/v1/hubs/{id}", { id: hubId }, { name: "Platform team" })).status).toBe(200);
    const invite = await call(ann, "post", "/v1/hubs/{id}/invites", { id: hubId }, { role: "viewer", email: bob.email });
    expect(invite.status).toBe(201);
    expect((await call(ann, "get", "/v1/hubs/{id}/invites", { id: hubId })).body.data.length).toBe(1);
    const added = await call(ann, "post", "/v1/hubs/{id}/members", { id: hubId }, { user_id: bob.id, role: "contributor" });
    expect(added.status).toBe(201);
    expect((await call(ann, "patch", "/v1/hubs/{id}/members/{user_id}", { id: hubId, user_id: bob.id }, { role: "viewer" })).status).toBe(200);
    const link = await call(ann, "post", "/v1/hubs/{id}/invites", { id: hubId }, {});
    const token = link.body.data.token as string;
    expect((await call(h.anonymous, "get", "/v1/invites/{token}", { token })).status).toBe(200);
    expect((await call(cat, "post", "/v1/invites/{token}/accept", { token })).status).toBe(200);
    const regenerated = await call(ann, "post", "/v1/hubs/{id}/invites/{invite_id}/regenerate", { id: hubId, invite_id: invite.body.data.id });
    expect(["200", "410"]).toContain(String(regenerated.status));
    const members = await call(bob, "get", "/v1/hubs/{id}/members", { id: hubId, query: "limit=2" });
    expect(members.body.data.has_more).toBe(true);
    expect((await call(bob, "get", "/v1/hubs/{id}", { id: hubId })).body.data.members.length).toBe(3);
    expect((await call(ann, "delete", "/v1/hubs/{id}/members/{user_id}", { id: hubId, user_id: cat.id })).status).toBe(200);
    expect((await call(bob, "get", "/v1/notifications")).status).toBe(200);
    expect((await call(bob, "get", "/v1/notifications/summary")).status).toBe(200);
    expect((await call(bob, "patch", "/v1/hubs/{id}", { id: hubId }, { name: "Mine now" })).status).toBe(403);
    expect((await call(ann, "delete", "/v1/hubs/{id}", { id: hubId })).status).toBe(200);
  });

  it("topics", async () => {
    const root = await call(ann, "post", "/v1/topics", {}, { name: "Engineering" });
    expect(root.status).toBe(201);
    const child = await call(ann, "post", "/v1/topics", {}, { name: "Deploys", parent_id: root.body.data.id });
    expect(child.status).toBe(201);
    expect((await call(ann, "get", "/v1/topics")).body.data.topics[0].children.length).toBe(1);
    expect((await call(ann, "get", "/v1/topics/{id}", { id: root.body.data.id })).status).toBe(200);
    expect((await call(ann, "patch", "/v1/topics/{id}", { id: child.body.data.id }, { pinned: true })).status).toBe(200);
    expect((await call(ann, "post", "/v1/topics", {}, { name: "Engineering" })).status).toBe(409);
    expect((await call(ann, "delete", "/v1/topics/{id}", { id: root.body.data.id })).body.data.deleted_count).toBe(2);
  });

  // Schemathesis reported these operations as "schema validation mismatch": bodies the document
  // allowed were refused. The document now states those rules, and it and the route agree.
  it("states the body rules the routes enforce: the document and the route accept and refuse the same bodies", async () => {
    const memory = (await call(ann, "post", "/v1/memories", {}, { content: "Rules travel with the document." })).body.data.id as string;
    const key = (await call(ann, "post", "/v1/auth/api-keys", {}, { name: "rules" })).body.data.id as string;
    const cases: [method: "post" | "patch" | "put", template: string, values: Record<string, string>, body: Json, accepted: boolean][] = [
      ["post", "/v1/memories", {}, {}, false],
      ["post", "/v1/memories", {}, { content: "", tags: ["x"] }, false],
      ["post", "/v1/memories", {}, { content: "A note." }, true],
      ["patch", "/v1/memories/{id}", { id: memory }, {}, false],
      ["patch", "/v1/memories/{id}", { id: memory }, { unknown: 1 }, false],
      ["patch", "/v1/memories/{id}", { id: memory }, { hint: "a hint" }, true],
      ["patch", "/v1/auth/me", {}, {}, false],
      ["patch", "/v1/auth/me", {}, { display_name: "   " }, false],
      ["patch", "/v1/auth/me", {}, { name: "Ann B" }, true],
      ["patch", "/v1/auth/api-keys/{id}", { id: key }, {}, false],
      ["patch", "/v1/auth/api-keys/{id}", { id: key }, { standalone: true }, true],
      ["put", "/v1/configs", {}, { agent: "claude-code", file_path: "CLAUDE.md", scope: "", content: "# Rules\n" }, false],
      ["put", "/v1/configs", {}, { agent: "claude-code", file_path: "CLAUDE.md", scope: "team", content: "# Rules\n" }, false],
      ["put", "/v1/configs", {}, { agent: "claude-code", file_path: "CLAUDE.md", scope: "profile:../x", content: "# Rules\n" }, false],
      ["put", "/v1/configs", {}, { agent: "claude-code", file_path: "CLAUDE.md", scope: "project:engram", content: "# Rules\n" }, true],
      ["post", "/v1/uploads", {}, { filename: "a.exe", content_type: "application/x-msdownload", size_bytes: 10 }, false],
      ["post", "/v1/uploads", {}, { filename: "a/b.txt", content_type: "text/plain", size_bytes: 10 }, false],
      ["post", "/v1/uploads", {}, { filename: "notes.txt", content_type: "text/plain; charset=utf-8", size_bytes: 10 }, true],
    ];
    for (const [method, template, values, body, accepted] of cases) {
      const res = await call(ann, method, template, values, body);
      const refused = res.status === 400 || res.status === 415;
      expect({ template, body, documented: validator.accepts(method, template, body), served: !refused }).toEqual({ template, body, documented: accepted, served: accepted });
    }
  });

  // Regressions found by `npm run fuzz`: each was a 500 before its fix.
  it("refuses NUL characters in bodies and queries with a 400 envelope instead of failing in the database", async () => {
    const kinds = await call(ann, "post", "/v1/notifications/seen", {}, { kinds: ["invite_accepted\u0000"] });
    expect(kinds.status).toBe(400);
    expect(kinds.body.error).toMatchObject({ code: "invalid_request", details: { issues: [{ path: "kinds.0" }] } });
    expect((await call(ann, "post", "/v1/notifications/dismiss", {}, { kinds: ["x"], "k\u0000": 1 })).status).toBe(400);
    expect((await call(ann, "post", "/v1/memories", {}, { content: "before\u0000after" })).status).toBe(400);
    expect((await call(ann, "get", "/v1/memories", { query: "topic_id=a%00b" })).status).toBe(400);
    expect((await call(ann, "post", "/v1/notifications/seen", {}, { kinds: ["invite_accepted"] })).status).toBe(200);
  });

  it("the validator fails a body that drifted from the document", async () => {
    const res = await call(ann, "get", "/v1/memories", { query: "limit=1" });
    const memory = res.body.data.memories[0] as Json;
    const drifted = (data: Json) => ({ ...res, body: { data: { ...res.body.data, memories: [data] } } });
    const { title: _title, ...withoutTitle } = memory;
    expect(() => validator.check("get", "/v1/memories", drifted(withoutTitle))).toThrow(/title/);
    expect(() => validator.check("get", "/v1/memories", drifted({ ...memory, secret_field: 1 }))).toThrow(/additional/);
    expect(() => validator.check("get", "/v1/memories", { ...res, body: { memories: [] } })).toThrow(/data/);
    expect(() => validator.check("get", "/v1/memories", { ...res, status: 302 })).toThrow(/does not list/);
  });

  it("checked every main resource's success shape", () => {
    const ok = [...seen].filter((entry) => /\s2\d\d$/.test(entry)).map((entry) => entry.replace(/\s\d+$/, ""));
    for (const op of ["post /v1/memories", "get /v1/memories", "get /v1/memories/{id}", "post /v1/recall", "get /v1/hubs/{id}", "get /v1/hubs/{id}/members", "get /v1/hubs/{id}/invites", "get /v1/invites/{token}", "get /v1/topics", "post /v1/auth/api-keys", "get /v1/usage", "get /v1/notifications"]) {
      expect(ok).toContain(op);
    }
  });
});

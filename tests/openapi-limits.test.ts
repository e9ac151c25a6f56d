import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_LIMIT, MAX_LIMIT } from "@/lib/api/pagination.ts";
import { MAX_CONFIGS_PER_USER, MAX_VERSIONS_KEPT } from "@/lib/configs/config-fields.ts";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import { SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT } from "@/lib/recall/recall-fields.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Every operation's `limit` and X-Hub-ID pointed at one shared description: "default 20, clamped to 100"
// and "else the personal hub". Quick search takes 10 by default and at most 50, personas and configs
// other numbers, and a search or a list without X-Hub-ID reads every hub, not the personal one: a client
// built from the document asked for pages it never got, or believed it searched one hub.

const doc = openApiDocument() as any;

function parameter(method: string, path: string, name: string) {
  const params = (doc.paths[path]?.[method]?.parameters ?? []) as any[];
  return params
    .map((p) => (p.$ref ? doc.components.parameters[(p.$ref as string).split("/").pop()!] : p))
    .find((p) => p.name === name);
}

/** The default and maximum a `limit` parameter documents, from its description and its schema. */
function documentedLimit(method: string, path: string): [number, number] {
  const limit = parameter(method, path, "limit");
  const description = limit.description as string;
  const [, fallback] = /default (\d+)/.exec(description) ?? [];
  const [, max] = /clamped to (\d+)/.exec(description) ?? [];
  expect(limit.schema.default, `${method} ${path}`).toBe(fallback);
  return [Number(fallback), Number(max)];
}

const LIMITS: Record<string, [number, number]> = {
  "get /v1/memories/search": [SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT],
  "get /v1/bar/search": [SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT],
  "get /v1/personas": [MAX_CONFIGS_PER_USER, MAX_CONFIGS_PER_USER],
  "get /v1/personas/{id}/revisions": [MAX_VERSIONS_KEPT, MAX_LIMIT],
  "get /v1/configs": [100, MAX_CONFIGS_PER_USER],
  "get /v1/configs/deleted": [100, MAX_LIMIT],
  "get /v1/configs/{id}/versions": [MAX_VERSIONS_KEPT, MAX_LIMIT],
};

/** Without X-Hub-ID: the personal hub, or every readable hub (searches, lists, recall's ranking). */
const EVERY_HUB = ["get /v1/memories", "get /v1/memories/search", "get /v1/bar/search", "post /v1/recall", "post /v1/ask", "post /v1/notifications/seen", "post /v1/notifications/dismiss"];

describe("the OpenAPI document's limit and X-Hub-ID", () => {
  it("state each operation's own default and maximum page size", () => {
    for (const [path, ops] of Object.entries(doc.paths) as [string, Record<string, unknown>][]) {
      for (const method of Object.keys(ops)) {
        if (!parameter(method, path, "limit")) continue;
        const key = `${method} ${path}`;
        expect([key, ...documentedLimit(method, path)]).toEqual([key, ...(LIMITS[key] ?? [DEFAULT_LIMIT, MAX_LIMIT])]);
      }
    }
  });

  it("say what each operation does without X-Hub-ID", () => {
    for (const [path, ops] of Object.entries(doc.paths) as [string, Record<string, unknown>][]) {
      for (const method of Object.keys(ops)) {
        const header = parameter(method, path, "X-Hub-ID");
        if (!header) continue;
        const key = `${method} ${path}`;
        const description = header.description as string;
        if (EVERY_HUB.includes(key)) expect([key, description]).toEqual([key, expect.stringMatching(/every (readable )?hub/)]);
        else expect([key, description]).toEqual([key, expect.stringContaining("personal hub")]);
      }
    }
  });

  describe("against the route", () => {
    let h: Harness;
    let ann: Client;

    beforeAll(async () => {
      h = await createHarness();
      ann = await h.user("Ann");
      const team = await h.teamHub(ann);
      // Found by title, without waiting for processing; in a team hub, so a search of the personal hub alone finds none.
      for (let i = 0; i < SEARCH_MAX_LIMIT + 5; i++) {
        expect((await ann.post("/v1/memories", { title: `Zebrafish ${i}`, content: `Tank ${i}.` }, { headers: { "x-hub-id": team } })).status).toBe(201);
      }
    });
    afterAll(async () => {
      await h.close();
    });

    it("GET /v1/memories/search answers the documented default and maximum, from every hub without X-Hub-ID", async () => {
      const [fallback, max] = documentedLimit("get", "/v1/memories/search");
      expect((await ann.get("/v1/memories/search?q=zebrafish")).body.data).toHaveLength(fallback);
      expect((await ann.get("/v1/memories/search?q=zebrafish&limit=1000")).body.data).toHaveLength(max);
      expect(parameter("get", "/v1/memories/search", "X-Hub-ID").description).not.toContain("personal hub");
    });
  });
});

import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

let h: Harness;
let ann: Client;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

describe("lone UTF-16 surrogates (a JSON \\ud800 escape) in any string field", () => {
  // JSON may spell a half of a surrogate pair as an escape; no UTF-8 text can hold one. The content
  // was stored with U+FFFD in its place, but a tag or a project_context value reached the database
  // as it was and failed there: a 500.
  test("are read as U+FFFD on create, in tags and project_context keys and values alike", async () => {
    const res = await ann.post("/v1/memories", undefined, {
      raw: '{"content":"lone \\ud800 surrogate","tags":["a\\ud800","\\udfffb"],"project_context":{"repo":"r\\udc00","k\\ud800":"v"}}',
    });
    expect(res.status).toBe(201);
    expect(res.body.data.tags).toEqual(["a\ufffd", "\ufffdb"]);
    const row = await h.db.memory.findUniqueOrThrow({ where: { id: res.body.data.id } });
    expect(row.content).toBe("lone \ufffd surrogate");
    expect(row.projectContext).toEqual({ repo: "r\ufffd", "k\ufffd": "v" });
  });

  test("are read as U+FFFD on PATCH", async () => {
    const { id } = (await ann.post("/v1/memories", { content: "patch my tags" })).body.data;
    const res = await ann.patch(`/v1/memories/${id}`, undefined, { raw: '{"tags":["x\\udbff"]}' });
    expect(res.status).toBe(200);
    expect(res.body.data.tags).toEqual(["x\ufffd"]);
  });

  test("a well-formed pair stays as it is", async () => {
    const res = await ann.post("/v1/memories", undefined, { raw: '{"content":"pair","tags":["\\ud83d\\ude00"]}' });
    expect(res.status).toBe(201);
    expect(res.body.data.tags).toEqual(["😀"]);
  });
});

/** Characters whose UTF-8 takes 3 bytes each and that do not compress: a long string of them stays long on disk. */
const han = (n: number, seed = 1) => Array.from({ length: n }, (_, i) => String.fromCodePoint(0x4e00 + ((i * 7919 + seed * 104729) % 20000))).join("");

describe("source_path's size", () => {
  // The unique index on (hub, source_path) holds at most about 2.7 kB per entry: 1,024 characters of
  // Chinese (3 kB of UTF-8) passed the length check and failed in the index, a 500.
  test("a path within 1,024 characters but over 2,048 bytes is a 400, not a 500", async () => {
    const res = await ann.post("/v1/memories", { content: "a long Chinese path", source_path: han(1000) });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.issues[0].path).toBe("source_path");
  });

  test("a path of 2,048 bytes is kept", async () => {
    const path = han(682) + "ab"; // 2,046 + 2 bytes
    const res = await ann.post("/v1/memories", { content: "a Chinese path at the limit", source_path: path });
    expect(res.status).toBe(201);
    const again = await ann.post("/v1/memories", { content: "a Chinese path at the limit, pushed again", source_path: path });
    expect(again.status).toBe(200);
    expect(again.body.data.id).toBe(res.body.data.id);
  });

  // A link without a source_path is its own source_path, and took none of the path's bounds: a URL of
  // a few thousand characters (a Chinese path, percent-encoded) failed in the index, a 500.
  test("a link too long to be its own source_path is a 400 naming the way out, and fine with a source_path", async () => {
    const url = `https://example.com/${han(2000, 2)}`;
    const res = await ann.post("/v1/memories", { content: url });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid_request");
    expect(res.body.error.details.issues[0].path).toBe("content");
    expect(res.body.error.message).toContain("source_path");
    const named = await ann.post("/v1/memories", { content: url, source_path: "links/long-chinese-page" });
    expect(named.status).toBe(201);
    expect(named.body.data.content_type).toBe("link");
  });
});

describe("content that is only white space", () => {
  // "" was refused as empty, but "  \n " made a memory of nothing titled "Untitled" (Memax's CLI refuses
  // it itself: "No content to push").
  test("is refused as empty on create and on PATCH, as \"\" is", async () => {
    for (const content of ["   ", " \n\t\r\n "]) {
      const created = await ann.post("/v1/memories", { content });
      expect([created.status, created.body.error?.code], JSON.stringify(content)).toEqual([400, "invalid_request"]);
      expect(created.body.error.details.issues[0].path).toBe("content");
    }
    const { id } = (await ann.post("/v1/memories", { content: "keep my words" })).body.data;
    const patched = await ann.patch(`/v1/memories/${id}`, { content: " \n " });
    expect([patched.status, patched.body.error?.code]).toEqual([400, "invalid_request"]);
    expect((await ann.get(`/v1/memories/${id}`)).body.data.content).toBe("keep my words");
  });
});

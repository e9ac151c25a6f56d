import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BODY_BYTES } from "@/lib/api/parse.ts";
import { MAX_CONTENT_BYTES, MAX_MEMORY_BODY_BYTES } from "@/lib/memories/memory-fields.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// A memory's content may be 3 MiB, but REST read its push and its PATCH under the 8 MiB every body gets:
// content heavy in JSON escapes (a control character is one byte and "\u0001" six; Python's json.dumps
// writes an emoji as 12 bytes) was refused with 413 within the content limit, while MCP took it.

let h: Harness;
let ann: Client;
beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(() => h.close());

/** Every byte a control character: 3 MiB of content, 18 MiB of JSON. */
const escaped = (label: string) => `${label}\n${"\u0001".repeat(MAX_CONTENT_BYTES - label.length - 1)}`;

describe("a memory's request body", () => {
  it("holds a push of content within its limit however much of it JSON escapes", async () => {
    const content = escaped("Pushed");
    expect(Buffer.byteLength(content)).toBe(MAX_CONTENT_BYTES);
    const res = await ann.post("/v1/memories", { content, title: "Escaped" });
    expect(res.status, res.text.slice(0, 300)).toBe(201);
    expect(res.body.data.title).toBe("Escaped");
  }, 60_000);

  it("holds 3 MiB of emoji as Python's json.dumps writes them (ensure_ascii: 12 bytes each)", async () => {
    const content = "😀".repeat(MAX_CONTENT_BYTES / 4);
    const raw = JSON.stringify({ content, title: "Emoji" }).replace(/😀/gu, "\\ud83d\\ude00");
    expect(raw.length).toBeGreaterThan(MAX_BODY_BYTES);
    const res = await ann.post("/v1/memories", undefined, { raw });
    expect(res.status, res.text.slice(0, 300)).toBe(201);
    expect(res.body.data.title).toBe("Emoji");
  }, 60_000);

  it("holds an edit to such content", async () => {
    const created = await ann.post("/v1/memories", { content: "# Short\n\nfor now" });
    const res = await ann.patch(`/v1/memories/${created.body.data.id}`, { content: escaped("Edited") });
    expect(res.status, res.text.slice(0, 300)).toBe(200);
  }, 60_000);

  it("is still refused past its bound, unread", async () => {
    const content = "\u0001".repeat(MAX_CONTENT_BYTES + 256 * 1024);
    expect(JSON.stringify({ content }).length).toBeGreaterThan(MAX_MEMORY_BODY_BYTES);
    const res = await ann.post("/v1/memories", { content });
    expect(res.status).toBe(413);
    expect(res.body.error).toMatchObject({ code: "body_too_large", details: { max_bytes: MAX_MEMORY_BODY_BYTES } });
  }, 60_000);
});

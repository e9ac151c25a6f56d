import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_CURSOR_LENGTH } from "@/lib/api/pagination.ts";
import { newId } from "@/lib/ids.ts";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// Only agent sessions bounded their cursor: every other list split, decoded and checked the signature
// of a cursor of any length (up to what the URL carries) before answering invalid_cursor. Every list
// the document describes with a cursor is walked, so a new one is covered as it is documented.

const doc = openApiDocument() as any;

function cursorOperations(): { method: string; path: string; schema: { maxLength?: number } }[] {
  const out = [];
  for (const [path, ops] of Object.entries(doc.paths) as [string, Record<string, any>][]) {
    for (const [method, op] of Object.entries(ops)) {
      const cursor = ((op.parameters ?? []) as any[])
        .map((p) => (p.$ref ? doc.components.parameters[(p.$ref as string).split("/").pop()!] : p))
        .find((p) => p.in === "query" && p.name === "cursor");
      if (cursor) out.push({ method, path, schema: cursor.schema });
    }
  }
  return out;
}

describe("every list's cursor parameter", () => {
  let h: Harness;
  let ann: Client;
  beforeAll(async () => {
    h = await createHarness();
    ann = await h.user("Ann");
  });
  afterAll(async () => {
    await h?.close();
  });

  it(`is at most ${MAX_CURSOR_LENGTH} characters, as documented: 400 invalid_request past it, before the cursor is read`, async () => {
    const operations = cursorOperations();
    expect(operations.map((op) => `${op.method} ${op.path}`)).toEqual(expect.arrayContaining([
      "get /v1/memories", "get /v1/agent-sessions", "get /v1/notifications", "get /v1/topics/{id}/memories", "get /v1/dreams/{id}/actions",
    ]));
    const answers: Record<string, unknown> = {};
    for (const { method, path, schema } of operations) {
      expect(method, path).toBe("get");
      const url = `${path.replace(/\{[^}]+\}/g, () => newId())}?cursor=${"a".repeat(MAX_CURSOR_LENGTH + 1)}`;
      const res = await ann.get(url);
      answers[path] = [schema.maxLength, res.status, res.body?.error?.code, res.body?.error?.details?.issues?.map((i: { path: string }) => i.path)];
    }
    expect(answers).toEqual(Object.fromEntries(operations.map(({ path }) => [path, [MAX_CURSOR_LENGTH, 400, "invalid_request", ["cursor"]]])));
  });
});

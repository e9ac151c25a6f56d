import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { ApiReference } from "@/components/api-reference.tsx";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";

describe("dashboard API reference page", () => {
  it("renders every operation of the document with its parameters, offline (no external assets)", () => {
    const html = renderToStaticMarkup(createElement(ApiReference));
    const doc = openApiDocument() as { paths: Record<string, Record<string, { operationId: string }>> };
    const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    for (const id of ids) expect(html).toContain(`id="${id}"`);
    expect(html).toContain("/v1/hubs/{id}/members/{user_id}");
    expect(html).toContain("created_after");
    expect(html).toContain('href="/v1/openapi.json"');
    expect(html).not.toMatch(/<(script|link)[^>]+(src|href)="https?:/);
  });
});

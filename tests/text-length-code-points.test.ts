import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { CHATGPT_TOOLS, ENGRAM_TOOLS } from "@/lib/mcp/mcp-tools.ts";
import { MAX_SOURCE_PATH_BYTES, MAX_SOURCE_PATH_LENGTH, MAX_TITLE_LENGTH } from "@/lib/memories/memory-fields.ts";
import { POST as mcpPost } from "@/app/mcp/route.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";

// JSON Schema's maxLength counts Unicode characters (code points), and tools/list and the OpenAPI
// document state each text's bound so. zod's .max() counts them too past its bound (zod 4.6), and these
// tests keep it so; a refinement stated as maxLength must count them as well: project_context's keys
// were counted in UTF-16 units, so a key of 100 emoji the listing admits was refused.

const ajv = new Ajv2020({ strict: false, validateFormats: false });
type Schema = { type?: string; maxLength?: number; pattern?: string; format?: string; items?: Schema; minItems?: number; properties?: Record<string, Schema> };
const EMOJI = ["😀", "🌊", "🦉", "🍄"];
const unwrap = (schema: z.ZodType): z.ZodType => (schema instanceof z.ZodOptional ? unwrap(schema.unwrap() as z.ZodType) : schema);

describe("a text's bound", () => {
  it("is what every tool's listed schema says it is, counted in characters, emoji included", () => {
    let checked = 0;
    for (const tool of [...ENGRAM_TOOLS, ...CHATGPT_TOOLS]) {
      const listed = tool.input["~standard"].jsonSchema.input({ target: "draft-2020-12" }) as Schema;
      for (const [name, property] of Object.entries(listed.properties ?? {})) {
        const field = tool.input.shape[name] as z.ZodType;
        const text = property.type === "array" ? property.items : property;
        // Ids and other patterned strings take no emoji at all.
        if (text?.type !== "string" || text.maxLength === undefined || text.format || (text.pattern && text.pattern !== "\\S")) continue;
        for (const extra of [0, 1]) {
          const value = (i: number) => EMOJI[i % EMOJI.length]!.repeat(text.maxLength! + extra);
          const arg = property.type === "array" ? Array.from({ length: Math.max(property.minItems ?? 1, 1) }, (_, i) => value(i)) : value(0);
          const says = ajv.validate(property, arg);
          expect({ tool: tool.name, name, extra, says }).toEqual({ tool: tool.name, name, extra, says: extra === 0 });
          expect({ tool: tool.name, name, extra, accepted: field.safeParse(arg).success }).toEqual({ tool: tool.name, name, extra, accepted: says });
          // The element alone too (an array's own rules, such as 2 to 4 options, aside).
          if (property.type === "array") expect(unwrap(field) instanceof z.ZodArray && (unwrap(field) as z.ZodArray<z.ZodType>).element.safeParse(value(0)).success).toBe(says);
        }
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(10);
  });

  it("of project_context's keys counts characters as the listed propertyNames does", () => {
    const push = ENGRAM_TOOLS.find((t) => t.name === "engram_push")!;
    const validate = ajv.compile(push.input["~standard"].jsonSchema.input({ target: "draft-2020-12" }));
    for (const [key, fits] of [["🦉".repeat(100), true], ["🦉".repeat(101), false]] as const) {
      const args = { content: "A note.", project_context: { [key]: "v" } };
      expect({ fits, listed: validate(args), accepted: push.input.safeParse(args).success }).toEqual({ fits, listed: fits, accepted: fits });
    }
  });
});

describe("over MCP and REST", () => {
  let h: Harness;
  let ann: Client;

  beforeAll(async () => {
    h = await createHarness();
    ann = await h.user("Ann");
  });

  afterAll(async () => {
    await h.close();
  });

  it("a title of the listed number of emoji is saved, one more is refused", async () => {
    const call = async (title: string) => {
      const req = new Request("http://engram.test/mcp", {
        method: "POST",
        headers: { authorization: `Bearer ${ann.key}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "engram_push", arguments: { content: `Notes ${title.length}`, title } } }),
      });
      return ((await (await mcpPost(req, { params: Promise.resolve({}) })).json()) as any).result;
    };
    const fits = await call("🦉".repeat(MAX_TITLE_LENGTH));
    expect(fits.isError, JSON.stringify(fits.structuredContent)).toBeFalsy();
    expect(fits.structuredContent.memory.title).toBe("🦉".repeat(MAX_TITLE_LENGTH));
    expect((await call("🦉".repeat(MAX_TITLE_LENGTH + 1))).structuredContent.error.code).toBe("invalid_request");

    const rest = await ann.post("/v1/memories", { content: "REST notes", title: "🌊".repeat(MAX_TITLE_LENGTH) });
    expect(rest.status, rest.text).toBe(201);
    expect((await ann.post("/v1/memories", { content: "REST notes 2", title: "🌊".repeat(MAX_TITLE_LENGTH + 1) })).status).toBe(400);
  });

  it("a source_path within its characters and bytes is saved though its emoji take two UTF-16 units each", async () => {
    // 1,013 characters, 13 of them emoji: 1,026 UTF-16 units, 1,052 bytes of UTF-8, within both documented bounds.
    const path = `notes/${"a".repeat(MAX_SOURCE_PATH_LENGTH - 13 - 6 - 11)}${"🦉".repeat(13)}`;
    expect([...path].length).toBeLessThanOrEqual(MAX_SOURCE_PATH_LENGTH);
    expect(path.length).toBeGreaterThan(MAX_SOURCE_PATH_LENGTH);
    expect(Buffer.byteLength(path)).toBeLessThanOrEqual(MAX_SOURCE_PATH_BYTES);
    const res = await ann.post("/v1/memories", { content: "Pathed notes", source_path: path });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.source_path).toBe(path);
    // One character more, or past the bytes, is still refused.
    expect((await ann.post("/v1/memories", { content: "Pathed notes 2", source_path: "a".repeat(MAX_SOURCE_PATH_LENGTH + 1) })).status).toBe(400);
    expect((await ann.post("/v1/memories", { content: "Pathed notes 3", source_path: "界".repeat(MAX_SOURCE_PATH_LENGTH) })).status).toBe(400);
  });
});

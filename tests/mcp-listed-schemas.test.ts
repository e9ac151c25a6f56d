import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { MAX_PROJECT_CONTEXT_KEYS } from "@/lib/memories/memory-fields.ts";
import { CHATGPT_TOOLS, ENGRAM_TOOLS } from "@/lib/mcp/mcp-tools.ts";

// tools/list shows each tool's input as JSON Schema (the SDK's conversion of the tool's zod schema), and
// clients and models shape their arguments by it. project_context's refinements (at most 32 keys, keys of
// at most 100 characters) were not in it: arguments the listing admits were refused by the tool.

const ajv = new Ajv2020({ strict: false, validateFormats: false });
const listed = (name: string) => {
  const tool = [...ENGRAM_TOOLS, ...CHATGPT_TOOLS].find((t) => t.name === name)!;
  return { tool, validate: ajv.compile(tool.input["~standard"].jsonSchema.input({ target: "draft-2020-12" })) };
};

const keys = (n: number, length = 3) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${"k".repeat(length)}${i}`, "v"]));

describe("a tool's listed input schema", () => {
  it("admits and refuses the same project_context the tool does", () => {
    const cases: [label: string, context: Record<string, string>][] = [
      ["at the key limit", keys(MAX_PROJECT_CONTEXT_KEYS)],
      ["one key past it", keys(MAX_PROJECT_CONTEXT_KEYS + 1)],
      ["a key of 100 characters", keys(1, 99)],
      ["a key of 101 characters", keys(1, 100)],
    ];
    for (const [name, base] of [["engram_push", { content: "A note." }], ["engram_recall", { query: "deploys" }], ["save_memory", { content: "A note." }]] as const) {
      const { tool, validate } = listed(name);
      for (const [label, context] of cases) {
        const args = { ...base, project_context: context };
        expect({ name, label, listed: validate(args) }).toEqual({ name, label, listed: tool.input.safeParse(args).success });
      }
    }
  });

  // Text the tool trims (a query, content, a title, a tag, a capture's lines) is refused when blank: the
  // listing said only "at least one character", so "   " looked valid to a client checking its arguments.
  it("admits and refuses the same blank and non-blank text the tool does", () => {
    const cases: [name: string, args: Record<string, unknown>][] = [];
    for (const blank of [" ", "\n\t ", "a"]) {
      cases.push(
        ["engram_recall", { query: blank }],
        ["engram_ask", { query: blank }],
        ["search", { query: blank }],
        ["engram_push", { content: blank }],
        ["engram_push", { content: "A note.", title: blank }],
        ["engram_push", { content: "A note.", tags: [blank] }],
        ["engram_capture", { summary: blank }],
        ["engram_capture", { summary: "Done.", decisions: [blank] }],
        ["engram_capture", { summary: "Done.", learnings: [blank] }],
        ["engram_request_decision", { question: blank, options: ["A", "B"] }],
        ["engram_request_decision", { question: "Which?", options: ["X", blank] }],
      );
    }
    for (const [name, args] of cases) {
      const { tool, validate } = listed(name);
      expect({ name, args, listed: validate(args) }).toEqual({ name, args, listed: tool.input.safeParse(args).success });
    }
  });

  it("admits and refuses the same options of a decision the tool does (2 to 4, never the same twice)", () => {
    const { tool, validate } = listed("engram_request_decision");
    for (const options of [["A"], ["A", "B"], ["A", "B", "C", "D"], ["A", "B", "C", "D", "E"], ["A", "A"], ["x".repeat(200), "B"], ["x".repeat(201), "B"]]) {
      const args = { question: "Which?", options };
      expect({ options, listed: validate(args) }).toEqual({ options, listed: tool.input.safeParse(args).success });
    }
  });
});

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, Output, type LanguageModel } from "ai";
import { z } from "zod";
import { KINDS, STABILITIES } from "@/lib/memories/memory-fields.ts";

let warned = false;

/** Characters of a memory sent to the chat model: enough to judge it, bounded in cost. */
const PROMPT_CONTENT_CHARS = 12_000;

/**
 * The configured chat model (ENGRAM_CHAT_MODEL through the OpenAI API or an
 * OpenAI-compatible server at OPENAI_BASE_URL), or null: classification and
 * summaries then use the deterministic local heuristics.
 */
export function chatModel(): LanguageModel | null {
  const name = process.env.ENGRAM_CHAT_MODEL;
  if (!name) return null;
  const apiKey = process.env.OPENAI_API_KEY;
  if (!apiKey) {
    // A half-configured model must not fail every memory: say so once and keep the heuristics.
    if (!warned) console.warn("[engram] chat model: ENGRAM_CHAT_MODEL is set but OPENAI_API_KEY is not; using local heuristics");
    warned = true;
    return null;
  }
  return createOpenAI({ apiKey, baseURL: process.env.OPENAI_BASE_URL || undefined }).chat(name);
}

export const memoryClassificationSchema = z.object({
  kind: z.enum(KINDS).describe("episodic: events; semantic: facts; procedural: how-to steps; rationale: decisions and why"),
  stability: z.enum(STABILITIES).describe("volatile: true for days; evolving: changes over months; stable: lasting"),
});

export const memorySummarySchema = z.object({
  summary: z.string().min(1).max(400).describe("one or two sentences saying what the memory contains, not its title"),
});

interface MemoryText {
  title: string;
  content: string;
  contentType: string;
  hint?: string | null;
}

function describe(memory: MemoryText): string {
  return [
    `Title: ${memory.title}`,
    `Content type: ${memory.contentType}`,
    memory.hint ? `Author's hint: ${memory.hint}` : undefined,
    "Content:",
    memory.content.slice(0, PROMPT_CONTENT_CHARS),
  ]
    .filter(Boolean)
    .join("\n");
}

export async function classifyWithModel(model: LanguageModel, memory: MemoryText) {
  const { output } = await generateText({
    model,
    output: Output.object({ schema: memoryClassificationSchema, name: "memory_classification" }),
    system: "You classify notes stored in a team memory. Answer with the kind and stability of the note.",
    prompt: describe(memory),
    maxRetries: 1,
  });
  return output;
}

export async function summarizeWithModel(model: LanguageModel, memory: MemoryText) {
  const { output } = await generateText({
    model,
    output: Output.object({ schema: memorySummarySchema, name: "memory_summary" }),
    system:
      "You summarise notes stored in a team memory in one or two plain sentences (at most 300 characters). Say what the note contains; never just repeat its title.",
    prompt: describe(memory),
    maxRetries: 1,
  });
  return output.summary.trim();
}

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, Output, type LanguageModel } from "ai";
import { z } from "zod";
import { positiveIntEnv } from "@/lib/config.ts";
import { KINDS, STABILITIES } from "@/lib/memories/memory-fields.ts";
import { modelTimeoutMs } from "./model-timeout.ts";

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
  // No max: a model that runs long would fail the schema and with it the memory's processing, retry after
  // retry; the summarise step cuts the summary to its 300 characters instead.
  summary: z.string().min(1).describe("one or two sentences (at most 300 characters) saying what the memory contains, not its title"),
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
    abortSignal: AbortSignal.timeout(modelTimeoutMs()),
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
    abortSignal: AbortSignal.timeout(modelTimeoutMs()),
  });
  return output.summary.trim();
}

/** Dream merges and topic names: each call is bounded in time (ENGRAM_DREAM_MODEL_TIMEOUT_MS, default 30 s) and in output, and any failure falls back. */
const dreamModelTimeoutMs = () => positiveIntEnv("ENGRAM_DREAM_MODEL_TIMEOUT_MS", 30_000);
/** A merge is only rewritten when both sides fit the prompt whole (a truncated side would lose facts). */
export const MERGE_MAX_INPUT_CHARS = 8_000;

/**
 * A dream's model call ends at its timeout, or at once when the run's worker stops (`signal`): the
 * timeout (30 s) is longer than a graceful stop's grace (10 s), and a call waited for past the grace
 * left the run holding a fresh heartbeat in a database the stop then closed.
 */
const dreamCallSignal = (signal?: AbortSignal) => (signal ? AbortSignal.any([AbortSignal.timeout(dreamModelTimeoutMs()), signal]) : AbortSignal.timeout(dreamModelTimeoutMs()));

export const mergedMemorySchema = z.object({
  content: z.string().min(1).describe("one note holding every fact, step and value of both notes, without repetition"),
});

export const topicNameSchema = z.object({
  name: z.string().min(1).max(60).describe("a short topic name of one to four words, e.g. 'Kubernetes operations'"),
});

/**
 * Rewrites the newer of two near-duplicate notes so it holds both; returns
 * null when the reply is empty or longer than both notes together (a model
 * that pads or invents is not trusted with the kept memory).
 */
export async function mergeWithModel(model: LanguageModel, older: MemoryText, newer: MemoryText, signal?: AbortSignal): Promise<string | null> {
  const bound = older.content.length + newer.content.length + 200;
  const { output } = await generateText({
    model,
    output: Output.object({ schema: mergedMemorySchema, name: "merged_memory" }),
    system:
      "You merge two near-duplicate notes from a team memory into one. Keep every fact, step, name and value from both; where they differ, prefer the NEWER note and keep the older detail only if it does not conflict. Do not add anything that is in neither note. Keep the newer note's format and language. Answer with the merged note only.",
    prompt: `OLDER NOTE\n${describe(older)}\n\nNEWER NOTE\n${describe(newer)}`,
    maxRetries: 0,
    maxOutputTokens: Math.min(4_000, Math.ceil(bound / 2) + 64),
    abortSignal: dreamCallSignal(signal),
  });
  const content = output.content.trim();
  return content && content.length <= bound ? content : null;
}

/** A name for a new topic from (at most 20 of) its memories' titles; null if unusable. */
export async function nameTopicWithModel(model: LanguageModel, titles: string[], fallback: string, signal?: AbortSignal): Promise<string | null> {
  const { output } = await generateText({
    model,
    output: Output.object({ schema: topicNameSchema, name: "topic_name" }),
    system: "You name a topic that groups related notes in a team memory. Answer with a short, specific name of one to four words, in the notes' language.",
    prompt: `Notes in the topic:\n${titles.slice(0, 20).map((t) => `- ${t.slice(0, 120)}`).join("\n")}\n\nDistinctive words: ${fallback}`,
    maxRetries: 0,
    maxOutputTokens: 60,
    abortSignal: dreamCallSignal(signal),
  });
  const name = output.name.replace(/\s+/g, " ").trim().replace(/^["'“]|["'”.]$/g, "");
  return name && name.length <= 60 ? name : null;
}

import { describe, expect, it } from "vitest";
import { chunkContent, CHUNK_MAX_TOKENS } from "@/lib/processing/chunk-content.ts";
import { estimateTokens } from "@/lib/processing/estimate-tokens.ts";
import { summarizeContent } from "@/lib/processing/summarize-content.ts";

const para = (topic: string, n: number) =>
  Array.from({ length: n }, (_, i) => `The ${topic} step ${i + 1} checks that every service reports healthy before traffic moves on.`).join(" ");

const runbook = [
  "# Release process",
  "",
  "How we ship the monolith every Tuesday.",
  "",
  "## Preparation",
  "",
  para("preparation", 12),
  "",
  para("preparation review", 10),
  "",
  "## Rollback",
  "",
  "Roll back when the error rate doubles.",
  "",
  para("rollback", 14),
  "",
  "```bash",
  "# a heading inside code is not a heading",
  "kubectl rollout undo deployment/api",
  "```",
  "",
  "### Database",
  "",
  para("database restore", 12),
].join("\n");

describe("chunkContent", () => {
  it("keeps a small memory in one chunk", () => {
    const chunks = chunkContent("# Deploy\n\nRun migrations first, then deploy.", "markdown");
    expect(chunks).toEqual([
      { position: 0, content: "# Deploy\n\nRun migrations first, then deploy.", headingChain: "Deploy", tokenCount: expect.any(Number) },
    ]);
    expect(chunkContent("   \n  ", "text")).toEqual([]);
  });

  it("splits markdown at headings with the heading chain, in bounded sections", () => {
    const chunks = chunkContent(runbook, "markdown");
    expect(chunks.length).toBeGreaterThanOrEqual(4);
    expect(chunks.map((c) => c.position)).toEqual(chunks.map((_, i) => i));
    const chains = chunks.map((c) => c.headingChain);
    expect(chains).toContain("Release process > Preparation");
    expect(chains).toContain("Release process > Rollback");
    expect(chains).toContain("Release process > Rollback > Database");
    expect(chains.some((c) => c.includes("heading inside code"))).toBe(false);
    for (const chunk of chunks) {
      expect(chunk.tokenCount).toBeLessThanOrEqual(CHUNK_MAX_TOKENS);
      expect(chunk.tokenCount).toBe(estimateTokens(chunk.content));
    }
    // The code fence stays whole and in its section.
    const fence = chunks.find((c) => c.content.includes("kubectl rollout undo"))!;
    expect(fence.content).toContain("```bash");
    expect(fence.content.match(/```/g)).toHaveLength(2);
    expect(fence.headingChain).toBe("Release process > Rollback");
    // Nothing is lost: every paragraph's words appear in some chunk.
    for (const word of ["Tuesday", "doubles", "preparation review step 10", "database restore step 12"]) {
      expect(chunks.some((c) => c.content.includes(word)), word).toBe(true);
    }
  });

  it("splits code at top-level definitions and names the chunk after them", () => {
    const fn = (name: string) =>
      [`export function ${name}(input: string): string {`, ...Array.from({ length: 9 }, (_, i) => `  const v${i} = input.replace(/x${i}/g, "${name}-${i}");`), "  return input;", "}"].join("\n");
    const code = [fn("alpha"), "", fn("beta"), "", fn("gamma")].join("\n");
    const chunks = chunkContent(code, "code");
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    for (const chunk of chunks) {
      expect(chunk.content.startsWith("export function")).toBe(true);
      expect(chunk.headingChain).toMatch(/^export function (alpha|beta|gamma)\(input: string\): string$/);
    }
    expect(chunks.map((c) => c.content).join("\n\n")).toBe(code);
  });

  it("cuts a function longer than a chunk at lines, keeping its name and indentation", () => {
    const body = Array.from({ length: 60 }, (_, i) => `    total += weights[${i}] * values[${i}] + offset_${i};`);
    const code = ["def weighted_total(values, weights):", "    total = 0", ...body, "    return total"].join("\n");
    const chunks = chunkContent(code, "python");
    expect(chunks.length).toBeGreaterThan(1);
    const coded = chunkContent(code, "code");
    expect(coded.length).toBeGreaterThan(1);
    for (const chunk of coded) {
      expect(chunk.headingChain).toBe("def weighted_total(values, weights)");
      expect(chunk.tokenCount).toBeLessThanOrEqual(CHUNK_MAX_TOKENS);
    }
    expect(coded[1]!.content.startsWith("    ")).toBe(true);
    expect(coded.map((c) => c.content).join("\n")).toBe(code);
  });

  it("keeps chat turns whole", () => {
    const turns = Array.from({ length: 40 }, (_, i) => `${i % 2 ? "assistant" : "user"}: ${para(`turn ${i}`, 2)}`);
    const chunks = chunkContent(turns.join("\n"), "chat");
    expect(chunks.length).toBeGreaterThan(3);
    for (const chunk of chunks) {
      expect(chunk.content).toMatch(/^(user|assistant): /);
      for (const line of chunk.content.split("\n")) expect(turns).toContain(line);
    }
  });

  it("splits plain text at sentence ends, never mid-sentence", () => {
    const text = para("plain", 80);
    const chunks = chunkContent(text, "text");
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) {
      expect(chunk.content).toMatch(/^The plain step \d+/);
      expect(chunk.content).toMatch(/on\.$/);
      expect(chunk.tokenCount).toBeGreaterThan(80);
    }
  });

  it("cuts Chinese at its sentence ends into chunks the model reads whole, and keeps every character", () => {
    const sentence = "生产数据库每天凌晨三点自动备份到对象存储，保留三十天。";
    const text = `# 备份\n\n${sentence.repeat(80)}\n\n${"备份".repeat(1500)}`;
    const chunks = chunkContent(text, "markdown");
    expect(chunks.length).toBeGreaterThan(15);
    for (const chunk of chunks) {
      expect(chunk.tokenCount).toBeLessThanOrEqual(CHUNK_MAX_TOKENS);
      expect(Array.from(chunk.content).length).toBeLessThanOrEqual(CHUNK_MAX_TOKENS + 10);
    }
    // The sentences' chunks end at a sentence's end.
    for (const chunk of chunks.filter((c) => c.content.includes("生产"))) expect(chunk.content).toMatch(/。$/);
    expect(chunks.map((c) => c.content).join("").replace(/\s/g, "")).toBe(text.replace(/\s/g, ""));
  });

  it("bounds pathological input: one enormous line", () => {
    const chunks = chunkContent("x".repeat(200_000), "text");
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) expect(chunk.tokenCount).toBeLessThanOrEqual(CHUNK_MAX_TOKENS);
  });

  it("stays linear on long runs of spaces in headings, definitions and paragraphs (ReDoS)", () => {
    const timed = (content: string, contentType: string) => {
      const started = performance.now();
      const chunks = chunkContent(content, contentType);
      return { chunks, ms: performance.now() - started };
    };
    // Each took minutes with the old regexes (the heading one is quartic in the run).
    const heading = timed(`# Deploy notes${" ".repeat(3_000)}x`, "markdown");
    const deepHeading = timed(`${runbook}\n\n## Rollback${" ".repeat(1_500)}\u00a0${" ".repeat(1_500)}x\n\n${para("tail", 12)}`, "markdown");
    const definition = timed(`function deploy${" ".repeat(300_000)}x`, "code");
    const paragraph = timed(`${para("spacing", 40)}\n\nword${" ".repeat(300_000)}word`, "text");
    for (const run of [heading, deepHeading, definition, paragraph]) expect(run.ms).toBeLessThan(3_000);
    expect(heading.chunks[0]!.headingChain).toBe(`Deploy notes${" ".repeat(3_000)}x`.slice(0, 120));
    expect(deepHeading.chunks.at(-1)!.headingChain).toMatch(/^Release process > Rollback {112}$/);
    expect(definition.chunks[0]!.headingChain).toBe(`function deploy${" ".repeat(300_000)}x`.slice(0, 120));
    expect(paragraph.chunks.at(-1)!.content.endsWith("word")).toBe(true);
  });

  it("reads headings, closing hashes, links and signatures as before", () => {
    const chain = (content: string, contentType = "markdown") => chunkContent(content, contentType)[0]!.headingChain;
    expect(chain("   ## Setup ##  \nbody")).toBe("Setup");
    // A run of `#` that is all the text is its closing sequence: an empty heading (CommonMark).
    expect(chain("# #\nbody")).toBe("");
    expect(chain("#\tSee [the guide](https://example.com/a) and **this** `x`\nbody")).toBe("See the guide and this x");
    expect(chain("#    \n# Real\nbody")).toBe("");
    expect(chain("body\n    # indented code\n# Title\nbody")).toBe("Title");
    expect(chain("####### seven\n###### six #\nbody")).toBe("six");
    expect(chain("# [a] [b](c) [](d) [e](f\nbody")).toBe("[a] b [](d) [e](f");
    expect(chain("class Deploy:  \n    pass", "code")).toBe("class Deploy");
    expect(chain("function deploy() {\n}", "code")).toBe("function deploy()");
    expect(chain("function deploy() {{\n}", "code")).toBe("function deploy() {");
  });
});

describe("headings read alike everywhere", () => {
  it("keep a # that ends the heading's last word (C#), in the heading chain as in the title", () => {
    const chain = (content: string) => chunkContent(content, "markdown")[0]!.headingChain;
    // The regex this copy mirrored took any trailing `#` for the closing sequence: "C#" was "C".
    expect(chain("# Notes on C#\nbody")).toBe("Notes on C#");
    expect(chain("## F# and C# ##\nbody")).toBe("F# and C#");
    expect(chain("# Setup#\nbody")).toBe("Setup#");
  });

  it("summarise the prose after an empty heading, not eat its line", () => {
    // `^\s{0,3}#{1,6}\s+.*$` ran its `\s+` past the empty heading's line end and removed the next line.
    const summary = summarizeContent("# Deploy\n\n## \nThe rollout waits for green health checks.", "markdown", "Deploy");
    expect(summary).toBe("The rollout waits for green health checks.");
    expect(summarizeContent("# Deploy\n\n## Setup ##\n\n## Rollback", "markdown", "Deploy")).toBe("Covers Setup and Rollback.");
  });
});

describe("fenced code reads alike everywhere", () => {
  it("closes a fence only with its own kind and length, so a # line in a ```` block is no heading and no prose", () => {
    // The chain and summary copies toggled on any ``` or ~~~ line: ``` inside ```` closed the block.
    const content = "Markdown samples for the docs site.\n\n````md\n```sh\n# not a heading\n```\nnot prose either\n````\n\n# Real title\n\nBody text.";
    expect(chunkContent(content, "markdown")[0]!.headingChain).toBe("Real title");
    expect(summarizeContent(content, "markdown", "x")).toBe("Markdown samples for the docs site. Body text.");
    expect(summarizeContent("# Setup\n\n```sh\n# install deps\n```\n\n## Run", "markdown", "Setup")).toBe("Covers Run.");
  });

  it("opens no fence on a line of inline code (```x```), or behind a tab (indented code), as CommonMark reads them", () => {
    // Taken for an opening fence, ```npm test``` made every heading after it code, to the end of the text.
    expect(chunkContent("Ran the suite.\n\n```npm test``` passed\n\n# Real title\n\nBody text.", "markdown")[0]!.headingChain).toBe("Real title");
    expect(chunkContent("Ran the suite.\n\n\t```\n\n# Real title\n\nBody text.", "markdown")[0]!.headingChain).toBe("Real title");
  });
});

describe("estimateTokens", () => {
  it("is close to the model tokenizer on prose, code and Chinese", async () => {
    const { AutoTokenizer, env } = await import("@huggingface/transformers");
    env.localModelPath = `${process.cwd()}/.cache/models`;
    env.allowRemoteModels = false;
    const tokenizer = await AutoTokenizer.from_pretrained("Xenova/all-MiniLM-L6-v2");
    const code = "export async function claimMemory(db: Db, id: string) {\n  const row = await db.memory.findUnique({ where: { id } });\n}";
    const chinese = "客服对话：Orbit 扫地机器人的固件升级一直卡在百分之四十，一晚上都没有完成。请按住重置按钮十秒回滚到旧版本，然后在稳定的网络下重新升级。";
    for (const sample of [runbook, code, para("sample", 20), chinese]) {
      const real = tokenizer.encode(sample, { add_special_tokens: false }).length;
      const estimate = estimateTokens(sample);
      expect(Math.abs(estimate - real) / real, `${estimate} vs ${real}`).toBeLessThan(0.2);
    }
  });
});

describe("summarizeContent", () => {
  it("summarises markdown from its prose, never just the title", () => {
    const summary = summarizeContent(runbook, "markdown", "Release process");
    expect(summary).toBe("How we ship the monolith every Tuesday. The preparation step 1 checks that every service reports healthy before traffic moves on.");
    const titled = summarizeContent("# Rollback\n\nRollback.\n\nRevert with `kubectl rollout undo` when errors double.", "markdown", "Rollback");
    expect(titled).toBe("Revert with kubectl rollout undo when errors double.");
  });

  it("is at most 300 characters and one or two sentences", () => {
    const summary = summarizeContent(para("long", 30), "text", "x");
    expect(summary.length).toBeLessThanOrEqual(300);
    expect(summary.split(/(?<=\.) /).length).toBeLessThanOrEqual(2);
  });

  it("strips tables, quotes, tags and links from markdown in linear time (ReDoS)", () => {
    const timed = (content: string) => {
      const started = performance.now();
      const summary = summarizeContent(content, "markdown", "x");
      return { summary, ms: performance.now() - started };
    };
    // Each took from half a minute to hours with the old regexes: ^\s* retried at every blank
    // line, and <[^>]+>, [^\]]+ rescanning to the end from every unclosed < or [.
    const blankLines = timed(`Deploys go out on Tuesdays.${"\n".repeat(300_000)}The end`);
    const angles = timed(`Keep p95 latency low.\n\n${"if a < b then ".repeat(50_000)}`);
    const brackets = timed(`Links are kept.\n\n${"[(".repeat(100_000)}`);
    for (const run of [blankLines, angles, brackets]) expect(run.ms).toBeLessThan(3_000);
    expect(blankLines.summary).toBe("Deploys go out on Tuesdays. The end.");
    expect(angles.summary).toMatch(/^Keep p95 latency low\. if a < b then if a < b then/);
    expect(brackets.summary).toMatch(/^Links are kept\. \[\(\[\(/);
  });

  it("strips tables, quotes, tags, images and links as before", () => {
    const md = (content: string) => summarizeContent(content, "markdown", "x");
    expect(md("| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter the table.\n\n> Quoted advice here.\n>\n> More of it")).toBe("After the table. Quoted advice here.");
    expect(md("Intro line\n\n\n   | row |\n\n\n| row |\nnext line")).toBe("Intro line. next line.");
    expect(md("See <b>bold</b> and <> and ![alt](img.png) plus [the guide](https://x.example) [] [](y).")).toBe("See bold and <> and plus the guide [] [](y).");
    expect(md("Line one\n\n> quote\n\n\n> two\ntail")).toBe("Line one. quote. two. tail.");
  });

  it("describes code and conversations that hold long runs of blank lines in linear time (ReDoS)", () => {
    const timed = (content: string, contentType: string) => {
      const started = performance.now();
      const summary = summarizeContent(content, contentType, "x");
      return { summary, ms: performance.now() - started };
    };
    // Each took from twenty seconds to a minute: ^\s* rescanning the run from each of its lines.
    const indented = timed(`${"\n\t".repeat(100_000)}export function deploy() {}`, "code");
    const comment = timed(`// Deploys the web tier.${"\n".repeat(200_000)}// Then the workers.\nexport function deploy() {}`, "code");
    const chat = timed(`Ann: Why is the deploy red?${"\n".repeat(200_000)}Bob: The migration timed out.`, "chat");
    for (const run of [indented, comment, chat]) expect(run.ms).toBeLessThan(3_000);
    expect(indented.summary).toBe("Code starting with `export function deploy() {}`.");
    expect(comment.summary).toBe("Deploys the web tier. Code defining `deploy`.");
    expect(chat.summary).toBe('Conversation between Ann and Bob (2 turns). It opens with: "Why is the deploy red?"');
  });

  it("describes code by its leading comment and definitions", () => {
    const summary = summarizeContent("// Parses release notes into sections.\nexport function parseNotes() {}\nclass Section {}\n", "code", "notes.ts");
    expect(summary).toBe("Parses release notes into sections. Code defining `parseNotes` and `Section`.");
  });

  it("describes a conversation by its speakers and opening", () => {
    const summary = summarizeContent("Ann: Why is the deploy red? It failed twice.\nBob: The migration timed out.\nAnn: Ok.", "chat", "x");
    expect(summary).toBe('Conversation between Ann and Bob (3 turns). It opens with: "Why is the deploy red?"');
  });
});

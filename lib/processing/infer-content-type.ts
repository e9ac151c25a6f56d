import type { ContentType } from "@/lib/memories/memory-fields.ts";
import { RUN_START } from "./line-start.ts";

// `^\s*[-*+]\s+\S` (flag m) without its quadratic rescans of blank lines.
const LIST_ITEM = new RegExp(String.raw`${RUN_START}\s*[-*+]\s+\S`);

const CODE_EXTENSIONS = new Set([
  "ts", "tsx", "js", "jsx", "mjs", "cjs", "py", "rb", "go", "rs", "java", "kt", "kts", "scala", "c", "h", "cc", "cpp", "cxx", "hpp",
  "cs", "fs", "swift", "m", "mm", "php", "pl", "pm", "lua", "r", "jl", "dart", "ex", "exs", "erl", "hs", "ml", "clj", "sql", "sh",
  "bash", "zsh", "fish", "ps1", "vue", "svelte", "css", "scss", "less", "tf", "hcl", "gradle", "groovy", "zig", "nim", "sol",
]);
const STRUCTURED_EXTENSIONS = new Set(["json", "jsonl", "ndjson", "yaml", "yml", "toml", "csv", "tsv", "xml", "ini", "env", "lock"]);
const MARKDOWN_EXTENSIONS = new Set(["md", "markdown", "mdx", "rst", "adoc"]);
const TEXT_EXTENSIONS = new Set(["txt", "text", "log"]);
const CODE_FILENAMES = new Set(["dockerfile", "makefile", "justfile", "rakefile", "gemfile", "procfile", "jenkinsfile"]);

/** content_type from the source_path extension, else from the content's shape. */
export function inferContentType(content: string, sourcePath?: string | null): ContentType {
  if (sourcePath) {
    const base = sourcePath.split(/[\\/]/).pop()!.toLowerCase();
    const ext = base.includes(".") ? base.split(".").pop()! : "";
    if (MARKDOWN_EXTENSIONS.has(ext)) return "markdown";
    if (CODE_EXTENSIONS.has(ext) || CODE_FILENAMES.has(base)) return "code";
    if (STRUCTURED_EXTENSIONS.has(ext)) return "structured";
    if (TEXT_EXTENSIONS.has(ext)) return "text";
  }
  const sample = content.slice(0, 20_000);
  const trimmed = sample.trim();
  if (/^https?:\/\/\S+$/.test(trimmed)) return "link";
  if ((trimmed.startsWith("{") && trimmed.endsWith("}")) || (trimmed.startsWith("[") && trimmed.endsWith("]"))) {
    try {
      JSON.parse(content);
      return "structured";
    } catch {
      // not JSON after all
    }
  }
  const lines = sample.split(/\r?\n/);
  const turnLines = lines.filter((line) => /^\s*(user|assistant|human|ai|system|[A-Z][\w .-]{0,30}):\s/.test(line)).length;
  if (turnLines >= 2 && turnLines >= lines.filter((l) => l.trim()).length * 0.3) return "chat";
  if (/^\s{0,3}#{1,6}\s+\S/m.test(sample) || LIST_ITEM.test(sample) || /```/.test(sample) || hasLink(sample)) {
    return "markdown";
  }
  const codeLines = lines.filter((line) =>
    /^\s*(import\s|export\s|from\s\S+\s+import|def\s|class\s|function\s|const\s|let\s|var\s|fn\s|func\s|package\s|#include|public\s|private\s|return\b|if\s*\(|for\s*\(|\}\s*$)/.test(line),
  ).length;
  if (codeLines >= 3 && codeLines >= lines.filter((l) => l.trim()).length * 0.25) return "code";
  return "text";
}

/**
 * Whether the text holds a link `[label](url)`, as `/\[[^\]]+\]\([^)]+\)/` told; that regex rescanned
 * to the end from every `[` without a closing bracket, quadratic on a long run of them.
 */
function hasLink(text: string): boolean {
  for (let i = text.indexOf("["); i !== -1; ) {
    const close = text.indexOf("]", i + 1);
    if (close === -1) return false;
    // Every `[` before this `]` ends its label here too, so they all pass or fail alike.
    if (close > i + 1 && text[close + 1] === "(" && text[close + 2] !== ")") return close + 2 < text.length && text.indexOf(")", close + 3) !== -1;
    i = text.indexOf("[", close + 1);
  }
  return false;
}

import type { ContentType } from "@/lib/memories/memory-fields.ts";

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
  if (/^\s{0,3}#{1,6}\s+\S/m.test(sample) || /^\s*[-*+]\s+\S/m.test(sample) || /```/.test(sample) || /\[[^\]]+\]\([^)]+\)/.test(sample)) {
    return "markdown";
  }
  const codeLines = lines.filter((line) =>
    /^\s*(import\s|export\s|from\s\S+\s+import|def\s|class\s|function\s|const\s|let\s|var\s|fn\s|func\s|package\s|#include|public\s|private\s|return\b|if\s*\(|for\s*\(|\}\s*$)/.test(line),
  ).length;
  if (codeLines >= 3 && codeLines >= lines.filter((l) => l.trim()).length * 0.25) return "code";
  return "text";
}

import type { ApiError } from "@/lib/api/errors.ts";

/** Issues a tool error lists: a call with hundreds of invalid items would otherwise answer with all of them. */
const MAX_ISSUES = 20;
/** Characters of one detail string (a path, an issue's message). */
const MAX_DETAIL_CHARS = 300;
/** Items of any other list in the details, and how deep objects are followed. */
const MAX_LIST_ITEMS = 20;
const MAX_DEPTH = 2;

/** Cut between characters: half a surrogate pair is written "\ud83d" in the JSON, which strict parsers refuse. */
function clip(text: string): string {
  if (text.length <= MAX_DETAIL_CHARS) return text;
  const cut = /[\ud800-\udbff]$/.test(text.slice(0, MAX_DETAIL_CHARS)) ? MAX_DETAIL_CHARS - 1 : MAX_DETAIL_CHARS;
  return `${text.slice(0, cut)}…`;
}

function bounded(value: unknown, depth: number): unknown {
  if (typeof value === "string") return clip(value);
  if (value === null || typeof value === "number" || typeof value === "boolean") return value;
  if (depth >= MAX_DEPTH) return undefined;
  if (Array.isArray(value)) return value.slice(0, MAX_LIST_ITEMS).map((item) => bounded(item, depth + 1) ?? null);
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .slice(0, MAX_LIST_ITEMS)
      .map(([key, item]) => [clip(key), bounded(item, depth + 1)] as const)
      .filter(([, item]) => item !== undefined);
    return Object.fromEntries(entries);
  }
  return undefined;
}

/**
 * REST's details of `error` (every invalid field, a limit, the seconds to wait), bounded in size, with
 * the Retry-After REST sends as a header given as `retry_after`: without them an agent learned of the
 * first invalid field alone, and never how long to wait before retrying.
 */
function toolErrorDetails(error: ApiError): Record<string, unknown> | undefined {
  const details: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error.details ?? {})) {
    if (key === "issues" && Array.isArray(value)) {
      details.issues = value.slice(0, MAX_ISSUES).map((issue: { path?: unknown; message?: unknown } | null) => ({
        path: clip(String(issue?.path ?? "")),
        message: clip(String(issue?.message ?? "")),
      }));
      if (value.length > MAX_ISSUES) details.issues_omitted = value.length - MAX_ISSUES;
      continue;
    }
    const safe = bounded(value, 0);
    if (safe !== undefined) details[key] = safe;
  }
  const retryAfter = Number(error.headers?.["Retry-After"]);
  if (details.retry_after === undefined && Number.isFinite(retryAfter) && retryAfter >= 0) details.retry_after = retryAfter;
  return Object.keys(details).length ? details : undefined;
}

/** A tool's failure as a result the model reads and acts on: REST's code, message and (bounded) details. */
export function toolErrorResult(error: ApiError) {
  const details = toolErrorDetails(error);
  const lines = [`Error (${error.code}): ${error.message}`];
  const issues = (details?.issues ?? []) as { path: string; message: string }[];
  // The message names the first invalid field; the others are listed so that one call can fix them all.
  if (issues.length > 1) {
    lines.push("Invalid:", ...issues.map((issue) => `- ${issue.path || "(arguments)"}: ${issue.message}`));
    if (details?.issues_omitted) lines.push(`- and ${String(details.issues_omitted)} more`);
  }
  if (typeof details?.retry_after === "number") lines.push(`Retry in ${details.retry_after} s.`);
  const structured = { code: error.code, message: error.message, ...(details ? { details } : {}) };
  return { isError: true, content: [{ type: "text" as const, text: lines.join("\n") }], structuredContent: { error: structured } };
}

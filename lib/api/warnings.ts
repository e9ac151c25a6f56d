/**
 * Warnings about a request's input that was ignored or coerced rather than rejected
 * (unknown fields, an unknown X-Timezone, …). The route wrapper sends them as one
 * `X-Engram-Warning` header, so lenient input never passes silently.
 */
const byRequest = new WeakMap<Request, string[]>();

/** At most this many characters of warnings go into the header. */
const MAX_HEADER_CHARS = 1000;

export function addWarning(req: Request, message: string): void {
  const list = byRequest.get(req) ?? [];
  if (!list.includes(message)) list.push(message);
  byRequest.set(req, list);
}

/** The header value for the request's warnings: printable ASCII, bounded; undefined when none. */
export function warningHeader(req: Request): string | undefined {
  const list = byRequest.get(req);
  if (!list?.length) return undefined;
  const text = list.join("; ").replace(/[^\x20-\x7e]/g, "?");
  return text.length > MAX_HEADER_CHARS ? `${text.slice(0, MAX_HEADER_CHARS - 3)}...` : text;
}

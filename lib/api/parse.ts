import { z } from "zod";
import { ApiError } from "./errors.ts";
import { addWarning } from "./warnings.ts";

/** Largest JSON body any endpoint accepts; content limits are checked after parsing. */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

export function validationError(error: z.ZodError, message = "Request is invalid"): ApiError {
  const issues = error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message }));
  const first = issues[0];
  return new ApiError(
    "invalid_request",
    first ? `${message}: ${first.path ? `${first.path}: ` : ""}${first.message}` : message,
    { issues },
  );
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, message?: string): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, message);
  return result.data;
}

/** Reads at most `maxBytes` of the body without buffering more than that. */
export async function readBody(req: Request, maxBytes: number): Promise<string> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  const tooLarge = () => new ApiError("body_too_large", `Request body exceeds ${maxBytes} bytes`, { max_bytes: maxBytes });
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge();
  if (!req.body) return "";
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

interface Def {
  type: string;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
}

const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** The object (or array) schema under optional/default/pipe/… wrappers, if the schema is one. */
function unwrappedDef(schema: z.ZodType, type: "object" | "array"): Def | undefined {
  for (let current: z.ZodType | undefined = schema, depth = 0; current && depth < 10; depth++) {
    const def = defOf(current);
    if (def.type === type) return def;
    current = def.type === "pipe" ? def.in : def.innerType;
  }
  return undefined;
}
const objectDef = (schema: z.ZodType) => unwrappedDef(schema, "object");

/** A field declared with `.meta({ keepEmpty: true })`, where `""` is a value (e.g. "clear this"). */
function keepsEmpty(schema: z.ZodType): boolean {
  for (let current: z.ZodType | undefined = schema, depth = 0; current && depth < 10; depth++) {
    if ((current.meta() as { keepEmpty?: boolean } | undefined)?.keepEmpty) return true;
    current = defOf(current).innerType;
  }
  return false;
}

/**
 * Lenient in form, strict in meaning — the one place it is done, for every body and query:
 * a field the schema does not know is dropped (and reported), whatever kind of object the
 * schema is (strict ones included; an object with a catchall keeps its extra keys), and `""`
 * in a field that may be absent means absent (unless the field is marked `keepEmpty`). Nested objects, in arrays or not, get the same treatment. What is
 * left is validated as declared, so known fields keep their errors.
 */
export function lenientInput(schema: z.ZodType, value: unknown, ignored: string[] = [], prefix = ""): unknown {
  // Objects inside arrays too (topics/reorder's operations).
  const element = Array.isArray(value) ? unwrappedDef(schema, "array")?.element : undefined;
  if (element) return (value as unknown[]).map((item, i) => lenientInput(element, item, ignored, `${prefix}${i}.`));
  const def = objectDef(schema);
  if (!def?.shape || value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const keepsExtra = def.catchall !== undefined && defOf(def.catchall).type !== "never";
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value as Record<string, unknown>)) {
    const fieldSchema = Object.hasOwn(def.shape, key) ? def.shape[key] : undefined;
    if (!fieldSchema) {
      if (keepsExtra) out[key] = field;
      else ignored.push(prefix + key);
      continue;
    }
    if (field === "" && fieldSchema.safeParse(undefined).success && !keepsEmpty(fieldSchema)) continue;
    out[key] = lenientInput(fieldSchema, field, ignored, `${prefix}${key}.`);
  }
  return out;
}

function lenientOrWarn(req: Request, schema: z.ZodType, value: unknown, what: string): unknown {
  const ignored: string[] = [];
  const result = lenientInput(schema, value, ignored);
  warnIgnored(req, what, ignored);
  return result;
}

function warnIgnored(req: Request, what: string, ignored: string[]): void {
  if (ignored.length === 0) return;
  const names = ignored.slice(0, 10).map((name) => (name.length > 40 ? `${name.slice(0, 37)}...` : name));
  addWarning(req, `ignored unknown ${what}: ${names.join(", ")}${ignored.length > 10 ? ` (+${ignored.length - 10} more)` : ""}`);
}

/** Parses a JSON body against a schema (leniently, see lenientInput): invalid_json, body_too_large or invalid_request. */
export async function parseJson<S extends z.ZodType>(
  req: Request,
  schema: S,
  options: { maxBytes?: number; optional?: boolean } = {},
): Promise<z.output<S>> {
  const text = await readBody(req, options.maxBytes ?? MAX_BODY_BYTES);
  let value: unknown;
  if (text.trim() === "") {
    if (!options.optional) throw new ApiError("invalid_json", "Request body must be a JSON object");
    value = {};
  } else {
    try {
      value = JSON.parse(text);
    } catch {
      throw new ApiError("invalid_json", "Request body is not valid JSON");
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ApiError("invalid_json", "Request body must be a JSON object");
  }
  refuseNul(value, "");
  return parseWith(schema, lenientOrWarn(req, schema, wellFormed(value), "fields"));
}

/**
 * JSON may spell half of a UTF-16 surrogate pair as an escape (`"\ud800"`), which no UTF-8 text can
 * hold: a content was stored with U+FFFD in its place by the driver, but a tag or a JSON field
 * (project_context) reached the database as it was and failed there, a 500. Every string, keys
 * included, now reads such a half as U+FFFD up front, as UTF-8 decoding reads a broken byte.
 */
export function wellFormed(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return value.isWellFormed() ? value : value.toWellFormed();
  if (value === null || typeof value !== "object") return value;
  // Past the depth any request may nest (refuseNul and the schemas refuse it), left as it is: walked
  // whole, 10,000 levels of MCP tool arguments overflowed the stack, a 500.
  if (depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((item) => wellFormed(item, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [wellFormed(key), wellFormed(item, depth + 1)]));
}

/** Parses query parameters (each as its last string value) against a schema. */
export function parseQuery<S extends z.ZodType>(req: Request, schema: S): z.output<S> {
  const params = Object.fromEntries(new URL(req.url).searchParams.entries());
  refuseNul(params, "");
  return parseWith(schema, lenientOrWarn(req, schema, params, "query parameters"), "Query is invalid");
}

/**
 * The query string of a route whose parameters repeat or take lists (`?kind=a&kind=b`), which a
 * schema of single values does not describe: unknown names are ignored with the same warning as
 * parseQuery's, and a NUL is refused the same way.
 */
export function queryParams(req: Request, known: readonly string[]): URLSearchParams {
  const params = new URL(req.url).searchParams;
  refuseNul(Object.fromEntries(params.entries()), "");
  warnIgnored(req, "query parameters", [...new Set([...params.keys()].filter((name) => !known.includes(name)))]);
  return params;
}

/**
 * PostgreSQL text cannot hold U+0000: a NUL anywhere in the input (a key or a value) would reach the
 * database and fail there as a 500 (found by `npm run fuzz`). It is refused up front as a 400.
 */
export function refuseNul(value: unknown, path: string, depth = 0): void {
  if (typeof value === "string") {
    if (value.includes("\0")) throw nulError(path);
    return;
  }
  if (value === null || typeof value !== "object") return;
  // JSON.parse reads any depth, but this walk and the schemas' recurse: a body of 100,000 nested
  // arrays overflowed the stack, a 500. No field needs more than a few levels.
  if (depth >= MAX_DEPTH) {
    const message = `nested more than ${MAX_DEPTH} levels deep`;
    throw new ApiError("invalid_request", `Request is invalid: ${path ? `${path}: ` : ""}${message}`, { issues: [{ path, message }] });
  }
  for (const [key, item] of Object.entries(value)) {
    const at = `${path}${path ? "." : ""}${key}`;
    if (key.includes("\0")) throw nulError(path || "(root)");
    refuseNul(item, at, depth + 1);
  }
}

/** How deep objects and arrays in a request may nest. */
const MAX_DEPTH = 64;

function nulError(path: string): ApiError {
  const message = "strings must not contain the NUL character (U+0000)";
  return new ApiError("invalid_request", `Request is invalid: ${path ? `${path}: ` : ""}${message}`, { issues: [{ path, message }] });
}

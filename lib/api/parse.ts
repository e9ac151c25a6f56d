import { z } from "zod";
import { ApiError } from "./errors.ts";

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
async function readBody(req: Request, maxBytes: number): Promise<string> {
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

/** Parses a JSON body against a schema: invalid_json, body_too_large or invalid_request. */
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
  return parseWith(schema, value);
}

/** Parses query parameters (each as its last string value) against a schema. */
export function parseQuery<S extends z.ZodType>(req: Request, schema: S): z.output<S> {
  const params = Object.fromEntries(new URL(req.url).searchParams.entries());
  return parseWith(schema, params, "Query is invalid");
}

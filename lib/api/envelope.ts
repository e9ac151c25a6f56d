import { ApiError } from "./errors.ts";

/** `{ data }` success envelope. */
export function ok(data: unknown, status = 200): Response {
  return Response.json({ data }, { status });
}

/** `{ error: { code, message, details? } }` envelope for an ApiError. */
export function errorResponse(error: ApiError): Response {
  const body: { code: string; message: string; details?: Record<string, unknown> } = {
    code: error.code,
    message: error.message,
  };
  if (error.details) body.details = error.details;
  // Every validation failure lists its issues (decisions.md); one raised without them names the request as a whole.
  if (error.code === "invalid_request" && !Array.isArray(body.details?.issues)) {
    body.details = { ...body.details, issues: [{ path: "", message: error.message }] };
  }
  return Response.json({ error: body }, { status: error.status, headers: error.headers });
}

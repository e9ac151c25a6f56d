import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listAgentSessionsQuerySchema, MAX_SESSION_BODY_BYTES, putAgentSessionBodySchema } from "@/lib/agent-sessions/agent-session-fields.ts";
import { listAgentSessions } from "@/lib/agent-sessions/list-agent-sessions.ts";
import { putAgentSession } from "@/lib/agent-sessions/put-agent-session.ts";

// GET /v1/agent-sessions — the caller's agent sessions, newest first; with session_id, their content too
export const GET = withAuth({ personal: true }, async (ctx, req) => ok(await listAgentSessions(ctx, parseQuery(req, listAgentSessionsQuerySchema))));

// PUT /v1/agent-sessions — store or replace one agent session file (201 when new)
export const PUT = withAuth({ personal: true }, async (ctx, req) => {
  const { session, created } = await putAgentSession(ctx, await parseJson(req, putAgentSessionBodySchema, { maxBytes: MAX_SESSION_BODY_BYTES }));
  return ok(session, created ? 201 : 200);
});

export const { POST, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "PUT");

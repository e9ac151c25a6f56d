import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { AgentSession } from "@/lib/db/generated/client.ts";
import { MAX_SESSION_CONTENT_BYTES_PER_PAGE, MAX_SESSIONS_WITH_CONTENT, type ListAgentSessionsQuery } from "./agent-session-fields.ts";
import { serializeAgentSession } from "./serialize-agent-session.ts";
import { sessionStoreFor } from "./session-store.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/**
 * GET /v1/agent-sessions: the caller's sessions, newest first (agent narrows).
 * With session_id the matching sessions carry their content, a page at most 5 of them and 5 MiB of
 * content (at least one session).
 */
export async function listAgentSessions(ctx: AuthContext, query: ListAgentSessionsQuery) {
  // With content, a page holds at most a few files: each may be 5 MiB.
  const limit = query.session_id ? Math.min(parseLimit(query.limit), MAX_SESSIONS_WITH_CONTENT) : parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `agent-sessions:${query.agent ?? ""}:${query.session_id ?? ""}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.agentSession.findMany({
    where: {
      ownerId: ctx.user.id,
      ...(query.agent && { agent: query.agent }),
      ...(query.session_id && { sessionId: query.session_id }),
      ...(after && { OR: [{ updatedAt: { lt: new Date(after[0]) } }, { updatedAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
    take: limit + 1,
  });
  const result = page("sessions", rows, query.session_id ? Math.min(limit, rowsWithinContentBudget(rows)) : limit, (last) =>
    encodeCursor(secret, list, ctx.user.id, [last.updatedAt.toISOString(), last.id]),
  );
  const sessions = await Promise.all(result.sessions.map((row) => (query.session_id ? withContent(ctx, row) : serializeAgentSession(row))));
  return { ...result, sessions: sessions.filter((session) => session !== null) };
}

/**
 * How many rows a page with content serves, by their sizes (known before any file is read): those up
 * to MAX_SESSION_CONTENT_BYTES_PER_PAGE in all, at least the first. The rest are has_more, after
 * next_cursor.
 */
function rowsWithinContentBudget(rows: AgentSession[]): number {
  let bytes = 0;
  for (const [i, row] of rows.entries()) {
    bytes += row.sizeBytes;
    if (i > 0 && bytes > MAX_SESSION_CONTENT_BYTES_PER_PAGE) return i;
  }
  return rows.length;
}

/**
 * A session with its file. A PUT of a new version between the row's read and the file's deletes the
 * version the row named: the row is read again and its current version served, or, deleted
 * meanwhile, the session is left out.
 */
async function withContent(ctx: AuthContext, row: AgentSession) {
  const content = await readSession(ctx, row.storeKey);
  if (content !== null) return serializeAgentSession(row, content);
  const current = await ctx.db.agentSession.findUnique({ where: { id: row.id } });
  if (!current) return null;
  return serializeAgentSession(current, current.storeKey === row.storeKey ? "" : ((await readSession(ctx, current.storeKey)) ?? ""));
}

async function readSession(ctx: AuthContext, key: string): Promise<string | null> {
  return (await sessionStoreFor(ctx.db, key)).get(key);
}

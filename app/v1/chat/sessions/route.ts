import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createChatSessionBodySchema, listChatSessionsQuerySchema } from "@/lib/chat/chat-fields.ts";
import { createChatSession } from "@/lib/chat/create-chat-session.ts";
import { listChatSessions } from "@/lib/chat/list-chat-sessions.ts";

// GET /v1/chat/sessions — the caller's chat sessions, most recently active first
export const GET = withAuth({}, async (ctx, req) => ok(await listChatSessions(ctx, parseQuery(req, listChatSessionsQuerySchema))));

// POST /v1/chat/sessions — start a chat over all the caller's hubs, one hub or a few
export const POST = withAuth({}, async (ctx, req) => ok(await createChatSession(ctx, await parseJson(req, createChatSessionBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

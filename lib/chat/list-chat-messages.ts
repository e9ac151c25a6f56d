import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { findChatMessageOrThrow, findChatSessionOrThrow } from "./chat-access.ts";
import type { ListChatMessagesQuery } from "./chat-fields.ts";
import { serializeChatMessage } from "./serialize-chat.ts";

/**
 * GET /v1/chat/sessions/{id}/messages: the conversation in order, oldest first. An answer that a
 * regenerated one replaced is left out (GET of its id still returns it).
 */
export async function listChatMessages(ctx: AuthContext, sessionId: string, query: ListChatMessagesQuery) {
  const session = await findChatSessionOrThrow(ctx, sessionId);
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `chat-messages:${session.id}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, z.int()) : undefined;
  // An assistant row that is another assistant row's parent was replaced (bounded by the session's message cap).
  const parents = await ctx.db.chatMessage.findMany({ where: { sessionId: session.id, role: "assistant", parentMessageId: { not: null } }, select: { parentMessageId: true } });
  const rows = await ctx.db.chatMessage.findMany({
    where: {
      sessionId: session.id,
      NOT: { role: "assistant", id: { in: parents.map((r) => r.parentMessageId!) } },
      ...(after !== undefined && { sequence: { gt: after } }),
    },
    orderBy: { sequence: "asc" },
    take: limit + 1,
  });
  const result = page("messages", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, last.sequence));
  return { ...result, messages: result.messages.map(serializeChatMessage) };
}

/** GET /v1/chat/sessions/{id}/messages/{message_id}. */
export async function getChatMessage(ctx: AuthContext, sessionId: string, messageId: string) {
  return serializeChatMessage((await findChatMessageOrThrow(ctx, sessionId, messageId)).message);
}

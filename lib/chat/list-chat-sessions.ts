import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { credentialSeesSession } from "./chat-access.ts";
import type { ListChatSessionsQuery } from "./chat-fields.ts";
import { serializeChatSession } from "./serialize-chat.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/** GET /v1/chat/sessions: the caller's sessions, most recently active first. */
export async function listChatSessions(ctx: AuthContext, query: ListChatSessionsQuery) {
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `chat-sessions:${query.archived ?? "false"}:${query.pinned ?? ""}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const where: Prisma.ChatSessionWhereInput = {
    ownerId: ctx.user.id,
    deletedAt: null,
    archivedAt: query.archived === "true" ? { not: null } : null,
    ...(query.pinned === "true" && { pinnedAt: { not: null } }),
    // A key limited to hubs sees the sessions within them: narrowed here, and exactly by the filter
    // below (a page may then hold fewer than limit; has_more still tells).
    ...(ctx.credential.hubIds !== null && { scopeType: { not: "user_all_hubs" }, scopeHubIds: { hasSome: [...ctx.credential.hubIds] } }),
    ...(after && { OR: [{ activityAt: { lt: new Date(after[0]) } }, { activityAt: new Date(after[0]), id: { lt: after[1] } }] }),
  };
  const rows = await ctx.db.chatSession.findMany({ where, orderBy: [{ activityAt: "desc" }, { id: "desc" }], take: limit + 1 });
  const result = page("sessions", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.activityAt.toISOString(), last.id]));
  return { ...result, sessions: result.sessions.filter((s) => credentialSeesSession(ctx.credential, s)).map(serializeChatSession) };
}

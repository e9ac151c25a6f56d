import type { AuthContext } from "@/lib/api/context.ts";
import { findChatSessionOrThrow } from "./chat-access.ts";
import { serializeChatSession } from "./serialize-chat.ts";

/** GET /v1/chat/sessions/{id}. */
export async function getChatSession(ctx: AuthContext, id: string) {
  return serializeChatSession(await findChatSessionOrThrow(ctx, id));
}

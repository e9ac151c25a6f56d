import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { regenerateChatMessage } from "@/lib/chat/regenerate-chat-message.ts";

type Params = { id: string; messageId: string };

// POST /v1/chat/sessions/{id}/messages/{message_id}/regenerate — answer the same question again
export const POST = withAuth<Params>({ bucket: "heavy" }, async (ctx, _req, { id, messageId }) => ok(await regenerateChatMessage(ctx, id, messageId), 202));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

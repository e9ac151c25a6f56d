import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { cancelChatMessage } from "@/lib/chat/cancel-chat-message.ts";

type Params = { id: string; messageId: string };

// POST /v1/chat/sessions/{id}/messages/{message_id}/cancel — stop an answer in flight
export const POST = withAuth<Params>({}, async (ctx, _req, { id, messageId }) => ok(await cancelChatMessage(ctx, id, messageId)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

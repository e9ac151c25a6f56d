import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { getChatMessage } from "@/lib/chat/list-chat-messages.ts";

type Params = { id: string; messageId: string };

// GET /v1/chat/sessions/{id}/messages/{message_id} — one message, as it stands now
export const GET = withAuth<Params>({}, async (ctx, _req, { id, messageId }) => ok(await getChatMessage(ctx, id, messageId)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

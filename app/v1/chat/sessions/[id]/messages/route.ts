import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listChatMessagesQuerySchema, sendChatMessageBodySchema } from "@/lib/chat/chat-fields.ts";
import { listChatMessages } from "@/lib/chat/list-chat-messages.ts";
import { sendChatMessage } from "@/lib/chat/send-chat-message.ts";

type Params = { id: string };

// GET /v1/chat/sessions/{id}/messages — the conversation, oldest first
export const GET = withAuth<Params>({}, async (ctx, req, { id }) => ok(await listChatMessages(ctx, id, parseQuery(req, listChatMessagesQuerySchema))));

// POST /v1/chat/sessions/{id}/messages — send a message; 202 with the answer's stream, 200 when an idempotent retry finds it finished
export const POST = withAuth<Params>({ bucket: "heavy" }, async (ctx, req, { id }) => {
  const { status, body } = await sendChatMessage(ctx, id, await parseJson(req, sendChatMessageBodySchema));
  return ok(body, status);
});

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

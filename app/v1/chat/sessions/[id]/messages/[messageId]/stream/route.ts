import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { lastEventId, streamChatMessage } from "@/lib/chat/stream-chat-message.ts";

type Params = { id: string; messageId: string };

// GET /v1/chat/sessions/{id}/messages/{message_id}/stream — the answer's events (SSE), replayed after Last-Event-ID, then live (HEAD: headers only, no stream)
export const GET = withAuth<Params>({}, async (ctx, req, { id, messageId }) =>
  streamChatMessage(ctx, id, messageId, lastEventId(req), req.signal, { head: req.method === "HEAD" }),
);

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

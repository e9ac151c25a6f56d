import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { updateChatSessionBodySchema } from "@/lib/chat/chat-fields.ts";
import { deleteChatSession } from "@/lib/chat/delete-chat-session.ts";
import { getChatSession } from "@/lib/chat/get-chat-session.ts";
import { updateChatSession } from "@/lib/chat/update-chat-session.ts";

type Params = { id: string };

// GET /v1/chat/sessions/{id} — one chat session
export const GET = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await getChatSession(ctx, id)));

// PATCH /v1/chat/sessions/{id} — title, pin, archive, tools, write hub, persona
export const PATCH = withAuth<Params>({}, async (ctx, req, { id }) => ok(await updateChatSession(ctx, id, await parseJson(req, updateChatSessionBodySchema))));

// DELETE /v1/chat/sessions/{id} — delete a session (a turn in flight is canceled)
export const DELETE = withAuth<Params>({}, async (ctx, _req, { id }) => ok(await deleteChatSession(ctx, id)));

export const { POST, PUT, OPTIONS } = methodsNotAllowed("GET", "PATCH", "DELETE");

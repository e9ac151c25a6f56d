import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listChatTools } from "@/lib/chat/list-chat-tools.ts";

// GET /v1/chat/tools — the agent chat's tool catalogue
export const GET = withAuth({ bucket: "light" }, async () => ok(listChatTools()));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

import { CHAT_TOOLS } from "./chat-fields.ts";

/** GET /v1/chat/tools: every tool, with whether it runs here, needs approval, and is on by default. */
export function listChatTools() {
  return CHAT_TOOLS.map((tool) => ({ ...tool }));
}

import type { AuthContext } from "@/lib/api/context.ts";
import { checkPersona, checkWriteHub, findChatSessionOrThrow } from "./chat-access.ts";
import type { UpdateChatSessionBody } from "./chat-fields.ts";
import { serializeChatSession } from "./serialize-chat.ts";

/**
 * PATCH /v1/chat/sessions/{id}: title, pin, archive, tools, write hub and persona. A change to the
 * tools, write hub or persona applies from the next turn; a turn in flight keeps what it started with.
 */
export async function updateChatSession(ctx: AuthContext, id: string, input: UpdateChatSessionBody) {
  const session = await findChatSessionOrThrow(ctx, id);
  if (input.write_hub_id) await checkWriteHub(ctx, session.scopeType, session.scopeHubIds, input.write_hub_id);
  const personaId = input.persona_id === undefined ? undefined : await checkPersona(ctx, input.persona_id);
  const now = ctx.now();
  const updated = await ctx.db.chatSession.update({
    where: { id: session.id },
    data: {
      ...(input.title !== undefined && { title: input.title }),
      ...(input.pinned !== undefined && { pinnedAt: input.pinned ? (session.pinnedAt ?? now) : null }),
      ...(input.archived !== undefined && { archivedAt: input.archived ? (session.archivedAt ?? now) : null }),
      ...(input.tools !== undefined && { tools: [...new Set(input.tools)] }),
      ...(input.write_hub_id !== undefined && { writeHubId: input.write_hub_id || null }),
      ...(personaId !== undefined && { personaId }),
      updatedAt: now,
    },
  });
  return serializeChatSession(updated);
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { checkPersona, checkWriteHub, findChatSessionOrThrow } from "./chat-access.ts";
import type { UpdateChatSessionBody } from "./chat-fields.ts";
import { lockChatSession } from "./send-chat-message.ts";
import { serializeChatSession } from "./serialize-chat.ts";

/**
 * PATCH /v1/chat/sessions/{id}: title, pin, archive, tools, write hub and persona. A change to the
 * tools, write hub or persona applies from the next turn; a turn in flight keeps what it started with.
 */
export async function updateChatSession(ctx: AuthContext, id: string, input: UpdateChatSessionBody) {
  const found = await findChatSessionOrThrow(ctx, id);
  if (input.write_hub_id) await checkWriteHub(ctx, found.scopeType, found.scopeHubIds, input.write_hub_id);
  const personaId = input.persona_id === undefined ? undefined : await checkPersona(ctx, input.persona_id);
  const updated = await ctx.db.$transaction(async (tx) => {
    // Under the session's lock, as a delete takes it: a session deleted since the check above is
    // not found, never written to after its tombstone.
    const session = await lockChatSession(tx, found.id);
    const now = ctx.now();
    // An account-data deletion removes the row without that lock: the write is conditional on the row.
    const { count } = await tx.chatSession.updateMany({
      where: { id: session.id, deletedAt: null },
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
    const row = count ? await tx.chatSession.findUnique({ where: { id: session.id } }) : null;
    if (!row) throw new ApiError("not_found", "Chat session not found");
    return row;
  });
  return serializeChatSession(updated);
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { newId } from "@/lib/ids.ts";
import { checkModel, checkPersona, checkPinnedMemories, checkWriteHub, resolveChatScope } from "./chat-access.ts";
import { CHAT_LIMITS, DEFAULT_CHAT_TOOLS, TOOLSET_VERSION, type CreateChatSessionBody } from "./chat-fields.ts";
import { serializeChatSession } from "./serialize-chat.ts";

/** POST /v1/chat/sessions: a new, idle session over the hubs it names (checked now, and again every turn). */
export async function createChatSession(ctx: AuthContext, input: CreateChatSessionBody) {
  const scope = await resolveChatScope(ctx, input.scope_type, input.scope_hub_ids);
  if (input.write_hub_id) await checkWriteHub(ctx, input.scope_type, scope, input.write_hub_id);
  const pinned = await checkPinnedMemories(ctx, input.scope_type, scope, input.pinned_memory_ids ?? []);
  const personaId = await checkPersona(ctx, input.persona_id ?? "");
  const model = checkModel(input.model);
  const now = ctx.now();
  const session = await ctx.db.$transaction(async (tx) => {
    // The owner's lock makes concurrent creates count each other.
    await lockForTransaction(tx, `chat-sessions:${ctx.user.id}`);
    const live = await tx.chatSession.count({ where: { ownerId: ctx.user.id, deletedAt: null } });
    if (live >= CHAT_LIMITS.sessionsPerUser) {
      throw new ApiError("conflict", `You keep ${live} chat sessions; the limit is ${CHAT_LIMITS.sessionsPerUser}. Delete some first.`, {
        limit: CHAT_LIMITS.sessionsPerUser,
      });
    }
    return tx.chatSession.create({
      data: {
        id: newId(now.getTime()),
        ownerId: ctx.user.id,
        scopeType: input.scope_type,
        scopeHubIds: scope,
        writeHubId: input.write_hub_id ?? null,
        title: input.title ?? "",
        model,
        tools: [...new Set(input.tools ?? DEFAULT_CHAT_TOOLS)],
        toolsetVersion: TOOLSET_VERSION,
        personaId,
        pinnedMemoryIds: pinned,
        activityAt: now,
        createdAt: now,
        updatedAt: now,
      },
    });
  });
  return serializeChatSession(session);
}

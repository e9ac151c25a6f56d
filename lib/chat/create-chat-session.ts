import type { AuthContext } from "@/lib/api/context.ts";
import { newId } from "@/lib/ids.ts";
import { checkModel, checkPersona, checkPinnedMemories, checkWriteHub, resolveChatScope } from "./chat-access.ts";
import { DEFAULT_CHAT_TOOLS, TOOLSET_VERSION, type CreateChatSessionBody } from "./chat-fields.ts";
import { serializeChatSession } from "./serialize-chat.ts";

/** POST /v1/chat/sessions: a new, idle session over the hubs it names (checked now, and again every turn). */
export async function createChatSession(ctx: AuthContext, input: CreateChatSessionBody) {
  const scope = await resolveChatScope(ctx, input.scope_type, input.scope_hub_ids);
  if (input.write_hub_id) await checkWriteHub(ctx, input.scope_type, scope, input.write_hub_id);
  const pinned = await checkPinnedMemories(ctx, input.scope_type, scope, input.pinned_memory_ids ?? []);
  const personaId = await checkPersona(ctx, input.persona_id ?? "");
  const now = ctx.now();
  const session = await ctx.db.chatSession.create({
    data: {
      id: newId(now.getTime()),
      ownerId: ctx.user.id,
      scopeType: input.scope_type,
      scopeHubIds: scope,
      writeHubId: input.write_hub_id ?? null,
      title: input.title ?? "",
      model: checkModel(input.model),
      tools: [...new Set(input.tools ?? DEFAULT_CHAT_TOOLS)],
      toolsetVersion: TOOLSET_VERSION,
      personaId,
      pinnedMemoryIds: pinned,
      activityAt: now,
      createdAt: now,
      updatedAt: now,
    },
  });
  return serializeChatSession(session);
}

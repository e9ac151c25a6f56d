import type { AuthContext, Credential } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { ChatSession } from "@/lib/db/generated/client.ts";
import { hubPermissionOrThrow, membershipOrThrow, memoryAccessWhere, readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { findPersonaOrThrow } from "@/lib/personas/persona-source.ts";
import { CHAT_LIMITS, chatModelNames, type ChatScopeType } from "./chat-fields.ts";

type Caller = Pick<AuthContext, "user" | "credential"> & { db: DbClient };

/**
 * Whether this credential may see a session. A key limited to some hubs sees only sessions whose
 * hubs it all reaches: an answer quotes memories of the session's hubs, and an all-hubs session
 * may quote any of them.
 */
export function credentialSeesSession(credential: Credential, session: Pick<ChatSession, "scopeType" | "scopeHubIds">): boolean {
  if (credential.hubIds === null) return true;
  const allowed = credential.hubIds;
  return session.scopeType !== "user_all_hubs" && session.scopeHubIds.every((id) => allowed.includes(id));
}

/** The caller's live session; someone else's, a deleted one or one the credential cannot see is not found. */
export async function findChatSessionOrThrow(ctx: Caller, id: string): Promise<ChatSession> {
  const session = isUuid(id) ? await ctx.db.chatSession.findFirst({ where: { id, ownerId: ctx.user.id, deletedAt: null } }) : null;
  if (!session || !credentialSeesSession(ctx.credential, session)) throw new ApiError("not_found", "Chat session not found");
  return session;
}

/** A message of one of the caller's sessions. */
export async function findChatMessageOrThrow(ctx: Caller, sessionId: string, messageId: string) {
  const session = await findChatSessionOrThrow(ctx, sessionId);
  const message = isUuid(messageId) ? await ctx.db.chatMessage.findFirst({ where: { id: messageId, sessionId: session.id } }) : null;
  if (!message) throw new ApiError("not_found", "Chat message not found");
  return { session, message };
}

/** The hubs a new session names, checked against the caller's access now. */
export async function resolveChatScope(ctx: Caller, scopeType: ChatScopeType, requested: string[] | undefined): Promise<string[]> {
  const ids = [...new Set(requested ?? [])];
  if (scopeType === "user_all_hubs") {
    if (ids.length > 0) throw new ApiError("invalid_request", "scope_hub_ids must be empty for scope_type user_all_hubs");
    if (ctx.credential.hubIds !== null) {
      throw new ApiError("forbidden", "This API key is limited to some hubs: start a single_hub or hub_subset session with them");
    }
    return [];
  }
  if (scopeType === "single_hub" && ids.length !== 1) throw new ApiError("invalid_request", "scope_type single_hub needs exactly one hub in scope_hub_ids");
  if (scopeType === "hub_subset" && ids.length === 0) throw new ApiError("invalid_request", "scope_type hub_subset needs at least one hub in scope_hub_ids");
  for (const id of ids) await membershipOrThrow(ctx, id);
  return ids;
}

/** A write hub must be one of the session's hubs where the caller (and the credential) may push. */
export async function checkWriteHub(ctx: Caller, scopeType: string, scope: string[], writeHubId: string): Promise<void> {
  if (scopeType !== "user_all_hubs" && !scope.includes(writeHubId)) {
    throw new ApiError("invalid_request", "write_hub_id must be one of the session's hubs");
  }
  await hubPermissionOrThrow(ctx, writeHubId, "memories.write", "save memories");
}

/** Pinned memories must be readable now, in the session's hubs. */
export async function checkPinnedMemories(ctx: Caller, scopeType: string, scope: string[], ids: string[]): Promise<string[]> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return [];
  const found = await ctx.db.memory.findMany({
    where: { AND: [memoryAccessWhere(ctx), { id: { in: unique } }, scopeType === "user_all_hubs" ? {} : { hubId: { in: scope } }] },
    select: { id: true },
  });
  const missing = unique.filter((id) => !found.some((m) => m.id === id));
  if (missing.length > 0) throw new ApiError("not_found", "Memory not found", { memory_ids: missing });
  return unique.slice(0, CHAT_LIMITS.pinnedMemories);
}

/** "" (inherit the account default), "none", or one of the caller's personas. */
export async function checkPersona(ctx: Caller, personaId: string): Promise<string> {
  if (personaId === "" || personaId === "none") return personaId;
  await findPersonaOrThrow(ctx.db, ctx.user.id, personaId);
  return personaId;
}

export function checkModel(model: string | undefined): string {
  const allowed = chatModelNames();
  if (model === undefined || model === "") return allowed[0]!;
  if (!allowed.includes(model)) throw new ApiError("invalid_request", `model "${model}" is not offered here`, { allowed });
  return model;
}

/**
 * The hubs a turn may read: the session's hubs the owner (under the sending credential) can read
 * at this moment. A hub they lost since the session started drops out of the next turn.
 */
export async function turnScope(ctx: Caller, session: Pick<ChatSession, "scopeType" | "scopeHubIds">): Promise<string[]> {
  const readable = (await readableHubs(ctx)).map((m) => m.hub.id);
  if (session.scopeType === "user_all_hubs") return readable;
  return session.scopeHubIds.filter((id) => readable.includes(id));
}

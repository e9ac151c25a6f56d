import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { MAX_VERSIONS_KEPT } from "@/lib/configs/config-fields.ts";
import type { AgentConfigVersion } from "@/lib/db/generated/client.ts";
import type { ListQuery } from "@/lib/hubs/hub-fields.ts";
import { findPersonaOrThrow } from "./persona-source.ts";

/** Memax's PersonaRevision (content only when one revision is asked for). */
export function serializeRevision(ownerId: string, version: Omit<AgentConfigVersion, "content"> & { content?: string }, withContent: boolean) {
  return {
    id: version.id,
    persona_id: version.configId,
    owner_id: ownerId,
    version: version.version,
    ...(withContent && { content: version.content }),
    content_hash: version.contentHash,
    created_at: version.createdAt.toISOString(),
  };
}

/**
 * GET /v1/personas/{id}/revisions: the stored versions of the persona's file, newest first, paged as
 * every list is; the default page is every kept version (MAX_VERSIONS_KEPT, 50), as Memax's
 * listRevisions (no cursor) reads them.
 */
export async function listPersonaRevisions(ctx: AuthContext, id: string, query: ListQuery = {}) {
  const config = await findPersonaOrThrow(ctx.db, ctx.user.id, id);
  const limit = parseLimit(query.limit, MAX_VERSIONS_KEPT);
  const secret = await serverSecret(ctx.db);
  const list = `personas:revisions:${config.id}`;
  const before = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, z.int()) : undefined;
  // Not the content: the list shows none, and 50 stored versions of 512 KiB were read per request.
  const versions = await ctx.db.agentConfigVersion.findMany({
    where: { configId: config.id, ...(before !== undefined && { version: { lt: before } }) },
    orderBy: { version: "desc" },
    select: { id: true, configId: true, version: true, contentHash: true, deviceId: true, createdAt: true },
    take: limit + 1,
  });
  const result = page("revisions", versions, limit, (last) => encodeCursor(secret, list, ctx.user.id, last.version));
  return { ...result, revisions: result.revisions.map((v) => serializeRevision(ctx.user.id, v, false)) };
}

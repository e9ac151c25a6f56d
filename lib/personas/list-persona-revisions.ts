import type { AuthContext } from "@/lib/api/context.ts";
import type { AgentConfigVersion } from "@/lib/db/generated/client.ts";
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

/** GET /v1/personas/{id}/revisions: the stored versions of the persona's file, newest first (at most MAX_VERSIONS_KEPT, 50). */
export async function listPersonaRevisions(ctx: AuthContext, id: string) {
  const config = await findPersonaOrThrow(ctx.db, ctx.user.id, id);
  // Not the content: the list shows none, and 50 stored versions of 512 KiB were read per request.
  const versions = await ctx.db.agentConfigVersion.findMany({
    where: { configId: config.id },
    orderBy: { version: "desc" },
    select: { id: true, configId: true, version: true, contentHash: true, deviceId: true, createdAt: true },
  });
  return { revisions: versions.map((v) => serializeRevision(ctx.user.id, v, false)) };
}

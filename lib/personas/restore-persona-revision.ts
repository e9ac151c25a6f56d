import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockConfigKey, recordVersion } from "@/lib/configs/upsert-config.ts";
import { findRevisionOrThrow } from "./get-persona-revision.ts";
import { isPersonaConfig, personaHead } from "./persona-source.ts";

// The file's identity and hash: a restore compares by hash and writes the revision's content, so the
// file's own content (up to 512 KiB, stored out of line) is never read.
const restoreHead = { ...personaHead, contentHash: true } as const;

/**
 * POST /v1/personas/{id}/revisions/{version}/restore: writes that revision's content back into the
 * persona's config file as a new version (history only grows; every device syncs it as a change).
 * Restoring the content the file already has changes nothing.
 */
export async function restorePersonaRevision(ctx: AuthContext, id: string, version: string) {
  const revision = await findRevisionOrThrow(ctx, id, version);
  const now = ctx.now();
  const head = await ctx.db.$transaction(async (tx) => {
    // Either read may find nothing: an account-data deletion removes configs without the file's lock.
    const config = await tx.agentConfig.findUnique({ where: { id: revision.configId }, select: restoreHead });
    if (!config) throw new ApiError("not_found", "Persona not found");
    await lockConfigKey(tx, config.ownerId, config.agent, config.filePath, config.scope);
    const current = await tx.agentConfig.findUnique({ where: { id: config.id }, select: restoreHead });
    // The persona as the lock sees it: one hidden (or its file deleted) since the check above is gone,
    // and a restore must not write it back into the list.
    if (!current || !isPersonaConfig(current)) throw new ApiError("not_found", "Persona not found");
    if (current.contentHash === revision.contentHash) return current.version;
    const updated = await tx.agentConfig.update({
      where: { id: current.id },
      data: { content: revision.content, contentHash: revision.contentHash, sizeBytes: Buffer.byteLength(revision.content, "utf8"), version: current.version + 1, updatedAt: now },
      select: { id: true, version: true },
    });
    await recordVersion(tx, current.ownerId, { ...updated, content: revision.content, contentHash: revision.contentHash }, null, now);
    return updated.version;
  });
  return { persona_id: revision.configId, restored_version: revision.version, head_version: head };
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { isUuid } from "@/lib/ids.ts";
import { DELETED_RETENTION_DAYS, type RestoreConfigBody } from "./config-fields.ts";
import { serializeConfig } from "./serialize-config.ts";
import { lockConfigKey, recordVersion } from "./upsert-config.ts";

/**
 * Deleting turns the row into a deletion record: version + 1, so every device
 * that synced an earlier version is told `delete_local`; the content stays
 * restorable for DELETED_RETENTION_DAYS.
 */
export async function tombstoneConfig(tx: DbClient, ownerId: string, id: string, now: Date): Promise<boolean> {
  const row = await tx.agentConfig.findFirst({ where: { id, ownerId, deletedAt: null }, select: { id: true, agent: true, filePath: true, scope: true } });
  if (!row) return false;
  await lockConfigKey(tx, ownerId, row.agent, row.filePath, row.scope);
  const updated = await tx.agentConfig.updateMany({
    where: { id, deletedAt: null },
    data: { deletedAt: now, contentExpiresAt: new Date(now.getTime() + DELETED_RETENTION_DAYS * 86_400_000), version: { increment: 1 }, updatedAt: now },
  });
  return updated.count === 1;
}

/** DELETE /v1/configs/:id */
export async function deleteConfig(ctx: AuthContext, id: string) {
  const now = ctx.now();
  const done = isUuid(id) && (await ctx.db.$transaction((tx) => tombstoneConfig(tx, ctx.user.id, id, now)));
  if (!done) throw new ApiError("not_found", "Config not found");
  return { id, deleted: true };
}

/** POST /v1/configs/batch-delete: partial success; unknown or already deleted ids are skipped as not_found. */
export async function batchDeleteConfigs(ctx: AuthContext, ids: string[]) {
  const now = ctx.now();
  let deleted = 0;
  const skipped: { id: string; reason: "not_found" | "delete_failed" }[] = [];
  for (const id of [...new Set(ids)]) {
    const done = isUuid(id) && (await ctx.db.$transaction((tx) => tombstoneConfig(tx, ctx.user.id, id, now)));
    if (done) deleted += 1;
    else skipped.push({ id, reason: "not_found" });
  }
  return { deleted, skipped };
}

/** POST /v1/configs/restore: a deleted config comes back as a new version with its last content. */
export async function restoreConfig(ctx: AuthContext, input: RestoreConfigBody) {
  const now = ctx.now();
  const candidates = await ctx.db.agentConfig.findMany({
    where: { ownerId: ctx.user.id, agent: input.agent, filePath: input.file_path, ...(input.scope && { scope: input.scope }) },
    // Without scope every project's copy of the file matches: their content is not needed to choose.
    select: { id: true, agent: true, filePath: true, scope: true, version: true, deletedAt: true, contentExpiresAt: true },
  });
  const deleted = candidates.filter((c) => c.deletedAt);
  if (deleted.length === 0) {
    if (candidates.length > 0) throw new ApiError("conflict", "This config is not deleted");
    throw new ApiError("not_found", "No deleted config matches");
  }
  if (deleted.length > 1) {
    throw new ApiError("invalid_request", "Several deleted configs match; give scope", {
      issues: [{ path: "scope", message: `one of ${deleted.map((c) => c.scope).join(", ")}` }],
    });
  }
  const target = deleted[0]!;
  if (!target.contentExpiresAt || target.contentExpiresAt <= now) throw new ApiError("expired", "This deleted config is past its retention and can no longer be restored");
  const restored = await ctx.db.$transaction(async (tx) => {
    await lockConfigKey(tx, ctx.user.id, target.agent, target.filePath, target.scope);
    const updated = await tx.agentConfig.updateMany({
      where: { id: target.id, version: target.version, deletedAt: { not: null } },
      data: { deletedAt: null, contentExpiresAt: null, version: target.version + 1, updatedAt: now },
    });
    if (updated.count !== 1) throw new ApiError("conflict", "This config changed meanwhile; list deleted configs again");
    const row = await tx.agentConfig.findUniqueOrThrow({ where: { id: target.id } });
    await recordVersion(tx, ctx.user.id, row, input.device_id ?? null, now);
    // No device base is recorded: a device whose own copy differs gets a conflict, never a silent overwrite.
    return row;
  });
  return serializeConfig(restored);
}

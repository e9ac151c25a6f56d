import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import type { AckConfigsBody, LocalDeleteBody } from "./config-fields.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { configKeyLock, recordDeviceSync } from "./upsert-config.ts";

/**
 * POST /v1/configs/ack: the device reports what it now holds after a sync
 * (pulled or unchanged files at a version, or a deletion it carried out). This
 * is the base the next sync decides from. Entries for unknown files are skipped.
 */
export async function ackConfigs(ctx: AuthContext, input: AckConfigsBody) {
  const now = ctx.now();
  let acknowledged = 0;
  const skipped: { agent: string; file_path: string; scope: string; reason: string }[] = [];
  await ctx.db.$transaction(async (tx) => {
    // Under the keys' locks, which the prune of expired deletion records takes too: read without them,
    // a record it removed meanwhile broke the device state's foreign key (500); now it is not_found.
    // Sorted, so two acks naming the same files in other orders never wait on each other in a cycle.
    const keys = [...new Set(input.configs.map((entry) => configKeyLock(ctx.user.id, entry.agent, entry.file_path, entry.scope)))].sort();
    await lockForTransaction(tx, keys);
    for (const entry of input.configs) {
      const config = await tx.agentConfig.findUnique({
        where: { ownerId_agent_filePath_scope: { ownerId: ctx.user.id, agent: entry.agent, filePath: entry.file_path, scope: entry.scope } },
        select: { id: true, version: true, contentHash: true, deletedAt: true },
      });
      if (!config) {
        skipped.push({ agent: entry.agent, file_path: entry.file_path, scope: entry.scope, reason: "not_found" });
        continue;
      }
      if (entry.version > config.version) {
        skipped.push({ agent: entry.agent, file_path: entry.file_path, scope: entry.scope, reason: "unknown_version" });
        continue;
      }
      // A device holding the cloud's current content holds its current version, whatever version it names:
      // memax acks a pull with its plan's version and the fetched file's hash, and a push from another
      // device between the two made the fetch newer than the plan. Recorded as the plan's version, the
      // device's next edit looked like a change on both sides (conflict) though it came after the cloud's.
      const holdsCurrent = !entry.deleted && config.deletedAt === null && entry.content_hash === config.contentHash;
      await recordDeviceSync(
        tx,
        config.id,
        input.device_id,
        entry.deleted
          ? { version: entry.version, hash: null, deleted: true, localPath: entry.local_path ?? null }
          : { version: holdsCurrent ? config.version : entry.version, hash: entry.content_hash ?? null, localPath: entry.local_path ?? null },
        now,
      );
      acknowledged += 1;
    }
  });
  return { acknowledged, skipped };
}

/** POST /v1/configs/local-delete: the file leaves this device only; sync will not bring it back here. */
export async function localDeleteConfig(ctx: AuthContext, input: LocalDeleteBody) {
  const now = ctx.now();
  const config = await ctx.db.$transaction(async (tx) => {
    // Under the key's lock, as every write of the file and the prune take it: read without it, a delete
    // committed meanwhile was answered removed at the stale version, and a prune of its record broke the
    // device state's foreign key (500).
    await lockForTransaction(tx, configKeyLock(ctx.user.id, input.agent, input.file_path, input.scope));
    const config = await tx.agentConfig.findUnique({
      where: { ownerId_agent_filePath_scope: { ownerId: ctx.user.id, agent: input.agent, filePath: input.file_path, scope: input.scope } },
      // The device's state is a version and a hash: the content (up to 512 KiB, out of line) is not needed.
      select: { id: true, agent: true, filePath: true, scope: true, version: true, contentHash: true, deletedAt: true },
    });
    if (!config || config.deletedAt) throw new ApiError("not_found", "Config not found");
    await recordDeviceSync(tx, config.id, input.device_id, { version: config.version, hash: config.contentHash, removed: true, localPath: input.local_path ?? null }, now);
    return config;
  });
  return { agent: config.agent, file_path: config.filePath, scope: config.scope, device_id: input.device_id, removed: true };
}

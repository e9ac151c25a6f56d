import { createHash } from "node:crypto";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { configBytesLimit } from "@/lib/quotas/quota-limits.ts";
import { DELETED_RETENTION_DAYS, MAX_CONFIG_BYTES, MAX_CONFIG_KEY_BYTES, MAX_CONFIGS_PER_USER, MAX_DEVICES_PER_CONFIG, MAX_VERSIONS_KEPT, type UpsertConfigBody } from "./config-fields.ts";
import { serializeConfig } from "./serialize-config.ts";

export function hashContent(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

export function assertConfigSize(content: string): number {
  const size = Buffer.byteLength(content, "utf8");
  if (size > MAX_CONFIG_BYTES) {
    throw new ApiError("file_too_large", `A config file is at most ${MAX_CONFIG_BYTES / 1024} KiB; this one is ${Math.ceil(size / 1024)} KiB`, {
      max_bytes: MAX_CONFIG_BYTES,
      size_bytes: size,
    });
  }
  return size;
}

/** Serialises writes to one config key of one owner (and creations against the per-user cap). */
export function lockConfigKey(tx: DbClient, ownerId: string, agent: string, filePath: string, scope: string): Promise<void> {
  return lockForTransaction(tx, configKeyLock(ownerId, agent, filePath, scope));
}

/** The advisory lock key of lockConfigKey, for a caller taking several at once. */
export const configKeyLock = (ownerId: string, agent: string, filePath: string, scope: string) => `agent-config:${ownerId}:${agent}:${filePath}:${scope}`;

/**
 * A deletion record counts toward the per-user cap while it can still be restored; past its
 * retention it no longer does, or every file an account ever deleted would hold its slot for good
 * and the cap could never be got under again. Expired records are removed by the periodic prune
 * (prune-config-deletions.ts); until it runs one may still be here, holding no slot.
 */
function countsTowardCap(config: { deletedAt: Date | null; contentExpiresAt: Date | null }, now: Date): boolean {
  return config.deletedAt === null || (config.contentExpiresAt !== null && config.contentExpiresAt > now);
}

/** Serialised per owner, so two creations cannot both take the last slot. */
async function assertRoomForConfig(tx: DbClient, ownerId: string, now: Date): Promise<void> {
  await lockForTransaction(tx, `agent-config-count:${ownerId}`);
  const count = await tx.agentConfig.count({ where: { ownerId, OR: [{ deletedAt: null }, { contentExpiresAt: { gt: now } }] } });
  if (count >= MAX_CONFIGS_PER_USER) {
    throw new ApiError(
      "conflict",
      `An account can sync at most ${MAX_CONFIGS_PER_USER} config files, deleted ones included while they can be restored (${DELETED_RETENTION_DAYS} days); delete some, or wait for deleted ones to expire`,
      { limit: MAX_CONFIGS_PER_USER },
    );
  }
}

/**
 * A new file's name must fit one entry of the config index (MAX_CONFIG_KEY_BYTES). Checked only when
 * the key is not stored yet: a name an older server stored (past this bound, within the index) keeps
 * getting new versions.
 */
function assertNewKeyFits(input: UpsertConfigBody): void {
  if (Buffer.byteLength(input.file_path, "utf8") + Buffer.byteLength(input.scope, "utf8") <= MAX_CONFIG_KEY_BYTES) return;
  const message = `file_path and scope are together at most ${MAX_CONFIG_KEY_BYTES} bytes (UTF-8)`;
  throw new ApiError("invalid_request", `Request is invalid: ${message}`, { issues: ["file_path", "scope"].map((path) => ({ path, message })) });
}

/**
 * PUT /v1/configs: stores a new version of one file (last writer wins; every
 * version stays in the history). The same content again is not a new version.
 * With device_id, that device's sync base becomes this version: it has it.
 */
export async function upsertConfig(ctx: AuthContext, input: UpsertConfigBody) {
  const size = assertConfigSize(input.content);
  const hash = hashContent(input.content);
  const now = ctx.now();
  const { config, created } = await ctx.db.$transaction(async (tx) => {
    await lockConfigKey(tx, ctx.user.id, input.agent, input.file_path, input.scope);
    // Not its content (up to 512 KiB, out of line): the hash tells whether it changed, and unchanged it is the input's.
    const existing = await tx.agentConfig.findUnique({
      where: { ownerId_agent_filePath_scope: { ownerId: ctx.user.id, agent: input.agent, filePath: input.file_path, scope: input.scope } },
      omit: { content: true },
    });
    let config;
    let created = false;
    let unchanged = false;
    // A name that cannot be stored is the first thing to say, before a full account.
    if (!existing) assertNewKeyFits(input);
    if (!existing || !countsTowardCap(existing, now)) await assertRoomForConfig(tx, ctx.user.id, now);
    if (!existing) {
      config = await tx.agentConfig.create({
        data: {
          id: newId(now.getTime()),
          ownerId: ctx.user.id,
          agent: input.agent,
          filePath: input.file_path,
          scope: input.scope,
          content: input.content,
          contentHash: hash,
          sizeBytes: size,
          version: 1,
          createdAt: now,
          updatedAt: now,
        },
      });
      created = true;
    } else if (existing.deletedAt === null && existing.contentHash === hash) {
      config = { ...existing, content: input.content };
      unchanged = true;
    } else {
      // A changed file, or a deleted one pushed again (kept locally, or recreated): a new version either way.
      config = await tx.agentConfig.update({
        where: { id: existing.id },
        data: { content: input.content, contentHash: hash, sizeBytes: size, version: existing.version + 1, deletedAt: null, contentExpiresAt: null, updatedAt: now },
      });
    }
    if (!unchanged) await recordVersion(tx, ctx.user.id, config, input.device_id ?? null, now);
    if (input.device_id) {
      await recordDeviceSync(tx, config.id, input.device_id, { version: config.version, hash, localPath: input.local_path ?? null }, now);
    }
    return { config, created };
  });
  return { config: serializeConfig(config), created };
}

/**
 * Stores a new version of an owner's config (and prunes past MAX_VERSIONS_KEPT), held to the owner's
 * byte cap (configBytesLimit) on every version kept. Every path that stores content comes here (PUT,
 * restore, a persona's restore), under one lock per owner, so two writes of different files cannot
 * both be measured against the same old total. A write that leaves the total no larger (a same-size
 * edit of a file with a full history) is allowed even past the cap, so a lowered cap never freezes
 * an account; a refusal throws, rolling the caller's transaction back.
 */
export async function recordVersion(
  tx: DbClient,
  ownerId: string,
  config: { id: string; version: number; content: string; contentHash: string },
  deviceId: string | null,
  now: Date,
): Promise<void> {
  const limit = configBytesLimit();
  let before = 0;
  if (limit !== null) {
    await lockForTransaction(tx, `agent-config-bytes:${ownerId}`);
    before = await storedConfigBytes(tx, ownerId);
  }
  await tx.agentConfigVersion.create({
    data: { id: newId(now.getTime()), configId: config.id, version: config.version, content: config.content, contentHash: config.contentHash, deviceId, createdAt: now },
  });
  let pruned = 0;
  if (config.version > MAX_VERSIONS_KEPT) {
    const rows = await tx.$queryRaw<{ bytes: number }[]>`
      DELETE FROM agent_config_versions WHERE config_id = ${config.id}::uuid AND version <= ${config.version - MAX_VERSIONS_KEPT}
      RETURNING octet_length(content)::int AS bytes`;
    pruned = rows.reduce((sum, row) => sum + Number(row.bytes), 0);
  }
  if (limit === null) return;
  const requested = Buffer.byteLength(config.content, "utf8");
  const after = before + requested - pruned;
  if (after > limit && after > before) {
    throw new ApiError(
      "quota_exceeded",
      `Your synced config files would take ${after} bytes, every kept version counted; the limit is ${limit} (${before} used, ${requested} more asked). Delete files you no longer sync (a deleted file's versions count until it can no longer be restored, ${DELETED_RETENTION_DAYS} days)`,
      { resource: "config_bytes", limit, used: before, requested },
    );
  }
}

/** Bytes of every kept version of the owner's configs: the length as stored, no content read (also GET /v1/usage's config_bytes). */
export async function storedConfigBytes(tx: DbClient, ownerId: string): Promise<number> {
  const [row] = await tx.$queryRaw<{ bytes: bigint }[]>`
    SELECT COALESCE(SUM(octet_length(v.content)), 0)::bigint AS bytes
    FROM agent_config_versions v JOIN agent_configs c ON c.id = v.config_id
    WHERE c.owner_id = ${ownerId}::uuid`;
  return Number(row?.bytes ?? 0);
}

/**
 * This device now holds `version` (hash null: it holds the deletion). A config keeps the sync state
 * of its MAX_DEVICES_PER_CONFIG most recently synced devices: device ids are the client's to choose
 * (a fresh one per container or reinstall), so without a bound every new id added a row for good. A
 * device whose state was dropped syncs as one that never synced this file: differing content is a
 * conflict, never a silent overwrite.
 */
export async function recordDeviceSync(
  tx: DbClient,
  configId: string,
  deviceId: string,
  state: { version: number; hash: string | null; deleted?: boolean; removed?: boolean; localPath?: string | null },
  now: Date,
): Promise<void> {
  // xmax = 0 on the returned row: it was inserted, not updated — only a new device can pass the bound.
  const [row] = await tx.$queryRaw<{ inserted: boolean }[]>`
    INSERT INTO agent_config_devices (config_id, device_id, synced_version, synced_hash, deleted, removed, local_path, updated_at)
    VALUES (${configId}::uuid, ${deviceId}, ${state.version}, ${state.hash}, ${state.deleted ?? false}, ${state.removed ?? false}, ${state.localPath ?? null}, ${now})
    ON CONFLICT (config_id, device_id) DO UPDATE SET
      synced_version = EXCLUDED.synced_version, synced_hash = EXCLUDED.synced_hash, deleted = EXCLUDED.deleted, removed = EXCLUDED.removed,
      local_path = COALESCE(EXCLUDED.local_path, agent_config_devices.local_path), updated_at = EXCLUDED.updated_at
    RETURNING (xmax = 0) AS inserted`;
  if (!row?.inserted) return;
  await tx.$executeRaw`
    DELETE FROM agent_config_devices WHERE config_id = ${configId}::uuid AND device_id IN (
      SELECT device_id FROM agent_config_devices WHERE config_id = ${configId}::uuid AND device_id <> ${deviceId}
      ORDER BY updated_at DESC, device_id DESC OFFSET ${MAX_DEVICES_PER_CONFIG - 1})`;
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { configKey, type SyncConfigsBody } from "./config-fields.ts";
import { decideSyncAction, type CloudState, type DeviceState, type SyncAction, type SyncReason } from "./decide-sync-action.ts";

export interface SyncPlanAction {
  action: SyncAction;
  agent: string;
  file_path: string;
  scope: string;
  reason: SyncReason;
  config_id?: string;
  cloud_hash?: string;
  cloud_updated_at?: string;
  version?: number;
}

/**
 * POST /v1/configs/sync: one action per file the device or the cloud knows,
 * decided by decideSyncAction from the device's manifest, the cloud rows
 * (deletion records included) and this device's last-synced state. Read only:
 * the device reports what it did through PUT (push) and /ack.
 */
export async function syncConfigs(ctx: AuthContext, input: SyncConfigsBody): Promise<{ actions: SyncPlanAction[] }> {
  const local = new Map<string, (typeof input.configs)[number]>();
  for (const entry of input.configs) {
    const key = configKey(entry);
    if (local.has(key)) {
      throw new ApiError("invalid_request", `configs lists ${entry.agent} ${entry.file_path} (${entry.scope}) twice`, {
        issues: [{ path: "configs", message: "duplicate agent, file_path and scope" }],
      });
    }
    local.set(key, entry);
  }
  const rows = await ctx.db.agentConfig.findMany({
    where: { ownerId: ctx.user.id },
    select: { id: true, agent: true, filePath: true, scope: true, contentHash: true, version: true, deletedAt: true, updatedAt: true },
    orderBy: [{ agent: "asc" }, { filePath: "asc" }, { scope: "asc" }],
  });
  const devices = await ctx.db.agentConfigDevice.findMany({
    where: { deviceId: input.device_id, configId: { in: rows.map((row) => row.id) } },
  });
  const deviceByConfig = new Map(devices.map((d) => [d.configId, d]));
  const actions: SyncPlanAction[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    const key = configKey(row);
    seen.add(key);
    const entry = local.get(key);
    const cloud: CloudState = row.deletedAt
      ? { kind: "deleted", version: row.version, deletedHash: row.contentHash }
      : { kind: "live", version: row.version, hash: row.contentHash };
    const d = deviceByConfig.get(row.id);
    const device: DeviceState | undefined = d && { version: d.syncedVersion, hash: d.syncedHash, deleted: d.deleted, removed: d.removed };
    const decision = decideSyncAction(entry && { hash: entry.content_hash }, cloud, device);
    if (!decision) continue;
    actions.push({
      ...decision,
      agent: row.agent,
      file_path: row.filePath,
      scope: row.scope,
      ...(!row.deletedAt && { config_id: row.id, cloud_hash: row.contentHash }),
      cloud_updated_at: row.updatedAt.toISOString(),
      version: row.version,
    });
  }
  for (const [key, entry] of local) {
    if (seen.has(key)) continue;
    const decision = decideSyncAction({ hash: entry.content_hash }, undefined, undefined)!;
    actions.push({ ...decision, agent: entry.agent, file_path: entry.file_path, scope: entry.scope });
  }
  return { actions };
}

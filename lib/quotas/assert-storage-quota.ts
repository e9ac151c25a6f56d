import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { quotaLimits } from "./quota-limits.ts";
import { storageUsages } from "./storage-usage.ts";

export interface StorageGrowth {
  /** The memory's owner: a user's quota counts what they own, whoever writes it. */
  ownerId: string;
  hubId: string;
  bytes: number;
  memories: number;
}

/** The locks assertStorageQuota holds, user before hub (the one order every writer uses). */
export function storageQuotaLockKeys(growth: Pick<StorageGrowth, "ownerId" | "hubId">): string[] {
  return [`quota:user:${growth.ownerId}`, `quota:hub:${growth.hubId}`];
}

/**
 * Refuses a write that would take its owner or its hub past a storage quota (413 quota_exceeded).
 * Call inside the transaction that writes: the locks taken here are held until it commits, so
 * concurrent writers to the same user or hub are checked one after the other, never both against
 * the same old total. Shrinking writes are always allowed.
 */
export async function assertStorageQuota(tx: DbClient, growth: StorageGrowth, options: { locked?: boolean } = {}): Promise<void> {
  if (growth.bytes <= 0 && growth.memories <= 0) return;
  const limits = quotaLimits();
  // `locked`: the caller already took storageQuotaLockKeys(growth) with its other locks.
  if (!options.locked) await lockForTransaction(tx, storageQuotaLockKeys(growth));
  const usage = await storageUsages(tx, { user: growth.ownerId, hub: growth.hubId });
  for (const scope of ["user", "hub"] as const) {
    const limit = limits[scope];
    if (limit.bytes === null && limit.memories === null) continue;
    const used = usage[scope];
    const who = scope === "user" ? "Your account" : "This hub";
    if (limit.memories !== null && growth.memories > 0 && used.memories + growth.memories > limit.memories) {
      throw new ApiError("quota_exceeded", `${who} has reached its quota of ${limit.memories} memories; delete some to add more`, {
        scope,
        resource: "memories",
        limit: limit.memories,
        used: used.memories,
      });
    }
    if (limit.bytes !== null && growth.bytes > 0 && used.bytes + growth.bytes > limit.bytes) {
      throw new ApiError("quota_exceeded", `${who} would exceed its storage quota of ${limit.bytes} bytes (${used.bytes} used, ${growth.bytes} more asked)`, {
        scope,
        resource: "bytes",
        limit: limit.bytes,
        used: used.bytes,
        requested: growth.bytes,
      });
    }
  }
}

import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { lockStorageUsageRows } from "@/lib/db/row-lock.ts";
import { quotaLimits } from "./quota-limits.ts";

export interface StorageGrowth {
  /** The memory's owner: a user's quota counts what they own, whoever writes it. */
  ownerId: string;
  hubId: string;
  bytes: number;
  memories: number;
}

/**
 * Refuses a write that would take its owner or its hub past a storage quota (413 quota_exceeded).
 * Call inside the transaction that writes. It locks the two counter rows (which the write's
 * trigger updates anyway, so they would be held until commit regardless): concurrent writers of the
 * same user or hub are checked one after the other, never both against the same old total, and
 * the lock is held only from here on, not for the whole transaction. Shrinking writes are always
 * allowed.
 */
export async function assertStorageQuota(tx: DbClient, growth: StorageGrowth): Promise<void> {
  if (growth.bytes <= 0 && growth.memories <= 0) return;
  const limits = quotaLimits();
  let rows = await lockStorageUsageRows(tx, growth.ownerId, growth.hubId);
  if (rows.length < 2) {
    // A first write of this user or hub: no row to lock yet, so concurrent first writers take turns
    // on advisory locks, then read (and lock) what the previous one created.
    await lockForTransaction(tx, [`quota:user:${growth.ownerId}`, `quota:hub:${growth.hubId}`]);
    rows = await lockStorageUsageRows(tx, growth.ownerId, growth.hubId);
  }
  const usage = (scope: "user" | "hub") => rows.find((row) => row.scope === scope) ?? { bytes: 0, memories: 0 };
  for (const scope of ["user", "hub"] as const) {
    const limit = limits[scope];
    if (limit.bytes === null && limit.memories === null) continue;
    const used = usage(scope);
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

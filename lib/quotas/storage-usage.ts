import type { DbClient } from "@/lib/db/database.ts";
import { quotaLimits, type QuotaLimit } from "./quota-limits.ts";

export interface StorageUsage {
  bytes: number;
  memories: number;
}

/** What a user owns (scope "user") or a hub holds (scope "hub"), from the trigger-kept counters. */
export async function storageUsage(db: DbClient, scope: "user" | "hub", id: string): Promise<StorageUsage> {
  const row = await db.storageUsage.findUnique({ where: { scope_scopeId: { scope, scopeId: id } } });
  return { bytes: Number(row?.bytes ?? 0), memories: row?.memories ?? 0 };
}

export interface QuotaReport {
  used_bytes: number;
  used_memories: number;
  limit_bytes: number | null;
  limit_memories: number | null;
}

const report = (used: StorageUsage, limit: QuotaLimit): QuotaReport => ({
  used_bytes: used.bytes,
  used_memories: used.memories,
  limit_bytes: limit.bytes,
  limit_memories: limit.memories,
});

/** Usage against the quotas, for GET /v1/usage: the user's, and each given hub's. */
export async function storageQuotaReport(db: DbClient, userId: string, hubIds: string[] = []) {
  const limits = quotaLimits();
  const hubs: Record<string, QuotaReport> = {};
  for (const hubId of hubIds) hubs[hubId] = report(await storageUsage(db, "hub", hubId), limits.hub);
  return { user: report(await storageUsage(db, "user", userId), limits.user), hubs };
}

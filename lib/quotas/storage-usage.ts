import type { DbClient } from "@/lib/db/database.ts";

export interface StorageUsage {
  bytes: number;
  memories: number;
}

/** What a user owns in the hubs they are a member of (scope "user") or a hub holds (scope "hub"), from the trigger-kept counters. */
export async function storageUsage(db: DbClient, scope: "user" | "hub", id: string): Promise<StorageUsage> {
  const row = await db.storageUsage.findUnique({ where: { scope_scopeId: { scope, scopeId: id } } });
  return { bytes: Number(row?.bytes ?? 0), memories: row?.memories ?? 0 };
}

import type { DbClient } from "@/lib/db/database.ts";
import type { StorageUsage } from "./storage-usage.ts";

/**
 * What a user owns in hubs marked deleted whose memories are not purged yet. The counters drop them
 * only as the purge deletes them, a batch at a time: the request purges for 5 s and the sweep comes
 * every 10 minutes, so a user who deleted a large hub to make room was refused (and shown as full
 * by /v1/usage) until then. Starts from the few hubs marked deleted (a partial index).
 */
export async function purgingUsage(db: DbClient, userId: string): Promise<StorageUsage> {
  const [row] = await db.$queryRaw<{ memories: number; bytes: bigint | number }[]>`
    SELECT count(*)::int AS memories, coalesce(sum(octet_length(m.content)::bigint + m.attachment_bytes), 0)::bigint AS bytes
      FROM hubs h JOIN memories m ON m.hub_id = h.id
     WHERE h.deleted_at IS NOT NULL AND m.owner_id = ${userId}::uuid`;
  return { memories: row?.memories ?? 0, bytes: Number(row?.bytes ?? 0) };
}

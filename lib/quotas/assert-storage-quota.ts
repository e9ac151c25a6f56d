import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { quotaLimits } from "./quota-limits.ts";
import type { StorageUsage } from "./storage-usage.ts";

export interface StorageGrowth {
  /** The memory's owner: a user's quota counts what they own, whoever writes it. */
  ownerId: string;
  hubId: string;
  bytes: number;
  memories: number;
}

/**
 * Refuses a write that took its owner or its hub past a storage quota (413 quota_exceeded), which
 * rolls the write back. Call inside the write's transaction, AFTER the write: the memories
 * trigger has then already added the growth to both counter rows and holds their row locks until
 * commit, so concurrent writers of the same user or hub are counted one after the other (never
 * both against the same old total), and what is read here includes this write. Checking first
 * would lock the rows before the insert and hold them through it: every push into a hub then
 * waited for the whole insert of the one before (measured in docs/processing.md). Shrinking
 * writes are always allowed.
 */
export async function assertStorageQuota(tx: DbClient, growth: StorageGrowth): Promise<void> {
  const read = storageQuotaRead(growth);
  if (!read) return;
  checkStorageQuota(growth, await tx.$queryRaw<StorageQuotaRow[]>(read));
}

/**
 * Whether `growth` fits its owner's and hub's quotas, read BEFORE the write: for a writer that does
 * less rather than fail when it does not (a dream merge then keeps the memory's text as it is). Exact
 * only while the caller holds both counters locked (lockUsageCounters): nothing else grows them between
 * this read and the write.
 */
export async function fitsStorageQuota(tx: DbClient, growth: StorageGrowth): Promise<boolean> {
  const read = storageQuotaRead(growth);
  if (!read) return true;
  return storageQuotaRefusal(growth, await tx.$queryRaw<StorageQuotaRow[]>(read), { written: false }) === undefined;
}

/** The counter rows of `growth`'s owner and hub, as storageQuotaRead reads them. */
export interface StorageQuotaRow {
  scope: string;
  bytes: string | number;
  memories: number;
}

/**
 * The read assertStorageQuota makes (a SELECT of StorageQuotaRow), for a caller that runs it within
 * a statement of its own after the write (a push with its event: emitEventAfterRead), then passes its
 * rows to checkStorageQuota. Undefined when nothing is to be checked (a shrink, or no quotas set).
 */
export function storageQuotaRead(growth: StorageGrowth): Prisma.Sql | undefined {
  if (growth.bytes <= 0 && growth.memories <= 0) return undefined;
  const limits = quotaLimits();
  const scopes = (["user", "hub"] as const).filter((scope) => limits[scope].bytes !== null || limits[scope].memories !== null);
  if (scopes.length === 0) return undefined;
  const ids = scopes.map((scope) => (scope === "user" ? growth.ownerId : growth.hubId));
  // The owner's row only while they are a member of the hub: what they own in a hub they left is not on
  // their counter (migration 20261203060000_member_storage_usage), so an admin's edit of it is not theirs to refuse.
  return Prisma.sql`
    SELECT u.scope, u.bytes::text AS bytes, u.memories
      FROM storage_usage u JOIN unnest(${scopes}::text[], ${ids}::uuid[]) AS k(scope, scope_id) ON u.scope = k.scope AND u.scope_id = k.scope_id
     WHERE u.scope <> 'user' OR EXISTS (SELECT FROM hub_members m WHERE m.hub_id = ${growth.hubId}::uuid AND m.user_id = u.scope_id)`;
}

/**
 * A condition on a row `r` of storageQuotaRead, true when its counters (this write included) are past
 * their quota: where checkStorageQuota refuses.
 */
export function storageQuotaPast(growth: StorageGrowth): Prisma.Sql {
  const limits = quotaLimits();
  const past = (["user", "hub"] as const).flatMap((scope) => {
    const limit = limits[scope];
    const over = [
      ...(limit.memories !== null && growth.memories > 0 ? [Prisma.sql`r.memories::bigint > ${limit.memories}::bigint`] : []),
      ...(limit.bytes !== null && growth.bytes > 0 ? [Prisma.sql`r.bytes::bigint > ${limit.bytes}::bigint`] : []),
    ];
    return over.length > 0 ? [Prisma.sql`(r.scope = ${scope}::text AND (${Prisma.join(over, " OR ")}))`] : [];
  });
  return past.length > 0 ? Prisma.join(past, " OR ") : Prisma.sql`false`;
}

/** assertStorageQuota's check on the rows its read gave (read after the write: they include it). */
export function checkStorageQuota(growth: StorageGrowth, rows: StorageQuotaRow[]): void {
  const refusal = storageQuotaRefusal(growth, rows, { written: true });
  if (refusal) throw refusal;
}

/** The 413 `growth` meets on these counter rows, read after the write (`written`) or before it; undefined when it fits. */
function storageQuotaRefusal(growth: StorageGrowth, rows: StorageQuotaRow[], { written }: { written: boolean }): ApiError | undefined {
  if (growth.bytes <= 0 && growth.memories <= 0) return undefined;
  const limits = quotaLimits();
  const scopes = (["user", "hub"] as const).filter((scope) => limits[scope].bytes !== null || limits[scope].memories !== null);
  for (const scope of scopes) {
    const limit = limits[scope];
    const row = rows.find((r) => r.scope === scope);
    // No row for the owner: the write is not on their counter (a hub they are no longer in).
    if (!row) continue;
    // What was used before this write (the error reports it as before).
    const used = written ? { bytes: Number(row.bytes) - growth.bytes, memories: Number(row.memories) - growth.memories } : { bytes: Number(row.bytes), memories: Number(row.memories) };
    const who = scope === "user" ? "Your account" : "This hub";
    if (limit.memories !== null && growth.memories > 0 && used.memories + growth.memories > limit.memories) {
      return new ApiError("quota_exceeded", `${who} has reached its quota of ${limit.memories} memories; delete some to add more`, {
        scope,
        resource: "memories",
        limit: limit.memories,
        used: used.memories,
      });
    }
    if (limit.bytes !== null && growth.bytes > 0 && used.bytes + growth.bytes > limit.bytes) {
      return new ApiError("quota_exceeded", `${who} would exceed its storage quota of ${limit.bytes} bytes (${used.bytes} used, ${growth.bytes} more asked)`, {
        scope,
        resource: "bytes",
        limit: limit.bytes,
        used: used.bytes,
        requested: growth.bytes,
      });
    }
  }
  return undefined;
}

/**
 * After memories moved into a hub (batch-move, same transaction): refuses the move when the hub is
 * now past its quota. The triggers already added the moved memories to the hub's counters, and the
 * mover holds that row locked (lockUsageCounters), so the row read here is exact. The owners' quotas
 * are assertOwnerQuotasAfterMove's.
 */
export async function assertHubQuotaAfterMove(tx: DbClient, hubId: string, movedIds: string[]): Promise<void> {
  const moved = movedIds.length;
  if (moved <= 0) return;
  const limit = quotaLimits().hub;
  if (limit.bytes === null && limit.memories === null) return;
  const row = await tx.storageUsage.findUnique({ where: { scope_scopeId: { scope: "hub", scopeId: hubId } } });
  const memories = row?.memories ?? 0;
  const bytes = Number(row?.bytes ?? 0);
  if (limit.memories !== null && memories > limit.memories) {
    throw new ApiError("quota_exceeded", `The target hub would hold ${memories} memories; its quota is ${limit.memories}. Nothing was moved`, {
      scope: "hub",
      resource: "memories",
      limit: limit.memories,
      used: memories - moved,
    });
  }
  if (limit.bytes !== null && bytes > limit.bytes) {
    // Only on refusal: what the moved memories brought, so `used` is the hub's bytes before the move,
    // as every other quota_exceeded reports it.
    const [sum] = await tx.$queryRaw<{ total: bigint | number | null }[]>`
      SELECT coalesce(sum(octet_length("content")::bigint + "attachment_bytes"), 0) AS "total" FROM "memories" WHERE "id" = ANY(${movedIds}::uuid[])`;
    const requested = Number(sum?.total ?? 0);
    throw new ApiError("quota_exceeded", `The target hub would hold ${bytes} bytes; its storage quota is ${limit.bytes}. Nothing was moved`, {
      scope: "hub",
      resource: "bytes",
      limit: limit.bytes,
      used: bytes - requested,
      requested,
    });
  }
}

/** The counters of these owners (scope "user"), read by a mover that holds them locked (lockUsageCounters). */
export async function ownerCounters(tx: DbClient, ownerIds: string[]): Promise<Map<string, StorageUsage>> {
  const rows = ownerIds.length ? await tx.storageUsage.findMany({ where: { scope: "user", scopeId: { in: ownerIds } } }) : [];
  return new Map(ownerIds.map((id) => {
    const row = rows.find((r) => r.scopeId === id);
    return [id, { bytes: Number(row?.bytes ?? 0), memories: row?.memories ?? 0 }];
  }));
}

/**
 * After memories moved (batch-move, same transaction): refuses the move when an owner's counter grew
 * past their quota. A move changes no owner, but it counts for them once it brings their memory from a
 * hub they are no longer in into one they are in: someone else's move may not fill their quota, any
 * more than a push of theirs may. `before` is ownerCounters before the moves, under the same locks.
 */
export async function assertOwnerQuotasAfterMove(tx: DbClient, before: Map<string, StorageUsage>): Promise<void> {
  const limit = quotaLimits().user;
  if (limit.bytes === null && limit.memories === null) return;
  const after = await ownerCounters(tx, [...before.keys()]);
  for (const [ownerId, was] of before) {
    const now = after.get(ownerId)!;
    const grown = { bytes: now.bytes - was.bytes, memories: now.memories - was.memories };
    // The mover is told whose quota it is and what the move would add for them, never the owner's totals:
    // those count their personal hub and hubs the mover is not in, which are no business of the mover's.
    if (limit.memories !== null && grown.memories > 0 && now.memories > limit.memories) {
      throw new ApiError("quota_exceeded", `The move would take the owner of some of these memories past their quota of ${limit.memories} memories. Nothing was moved`, {
        scope: "user",
        resource: "memories",
        owner_id: ownerId,
        limit: limit.memories,
        requested: grown.memories,
      });
    }
    if (limit.bytes !== null && grown.bytes > 0 && now.bytes > limit.bytes) {
      throw new ApiError("quota_exceeded", `The move would take the owner of some of these memories past their storage quota of ${limit.bytes} bytes. Nothing was moved`, {
        scope: "user",
        resource: "bytes",
        owner_id: ownerId,
        limit: limit.bytes,
        requested: grown.bytes,
      });
    }
  }
}

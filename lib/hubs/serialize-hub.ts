import type { HubRecord } from "@/lib/api/context.ts";

/** The hub object of decisions.md. */
export function serializeHub(hub: HubRecord) {
  return {
    id: hub.id,
    name: hub.name,
    slug: hub.slug,
    hub_type: hub.hubType as "personal" | "team",
    owner_id: hub.ownerId,
    allow_contributor_topics: hub.allowContributorTopics,
    allow_contributor_dreams: hub.allowContributorDreams,
    contributor_delete_policy: hub.contributorDeletePolicy,
    created_at: hub.createdAt.toISOString(),
    updated_at: hub.updatedAt.toISOString(),
  };
}

export function serializeMember(row: { userId: string; role: string; joinedAt: Date; user: { name: string; email: string } }) {
  return { user_id: row.userId, role: row.role, name: row.user.name, email: row.user.email, joined_at: row.joinedAt.toISOString() };
}

interface TransferRow {
  id: string;
  hubId: string;
  fromUserId: string;
  targetUserId: string;
  state: string;
  createdAt: Date;
  expiresAt: Date;
  resolvedAt: Date | null;
}

/** A pending transfer past its expiry reads as `expired`; nothing needs to sweep it. */
export function transferState(row: TransferRow, now: Date): string {
  return row.state === "pending" && row.expiresAt <= now ? "expired" : row.state;
}

export function serializeTransfer(row: TransferRow, now: Date) {
  return {
    id: row.id,
    hub_id: row.hubId,
    from_user_id: row.fromUserId,
    target_user_id: row.targetUserId,
    state: transferState(row, now),
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    resolved_at: row.resolvedAt?.toISOString() ?? null,
  };
}

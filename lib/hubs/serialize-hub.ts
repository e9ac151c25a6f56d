import type { HubRecord } from "@/lib/api/context.ts";
import type { Role } from "@/lib/api/permissions.ts";
import type { HubObject, MemberObject, TransferObject } from "./hub-object.ts";

/** The hub object of decisions.md, with the Memax SDK's appearance fields (omitted while unset). */
export function serializeHub(hub: HubRecord): HubObject {
  return {
    id: hub.id,
    name: hub.name,
    slug: hub.slug,
    hub_type: hub.hubType as "personal" | "team",
    owner_id: hub.ownerId,
    ...(hub.icon && { icon: hub.icon }),
    ...(hub.accent && { accent: hub.accent }),
    ...(hub.headerAuroraMode && { header_aurora_mode: hub.headerAuroraMode }),
    settings: hubSettings(hub.settings),
    allow_contributor_topics: hub.allowContributorTopics,
    allow_contributor_dreams: hub.allowContributorDreams,
    contributor_delete_policy: hub.contributorDeletePolicy,
    created_at: hub.createdAt.toISOString(),
    updated_at: hub.updatedAt.toISOString(),
  };
}

export function hubSettings(value: unknown): Record<string, boolean> {
  if (!value || typeof value !== "object" || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((entry): entry is [string, boolean] => typeof entry[1] === "boolean"));
}

/** Roles that see members' e-mail addresses; everyone else gets them masked. */
export function seesMemberEmails(viewerRole: Role | undefined): boolean {
  return viewerRole === "owner" || viewerRole === "admin";
}

/** "ann@example.com" → "a•••@example.com": enough to tell two members apart, not to write to them. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf("@");
  if (at <= 0) return "•••";
  return `${email[0]}•••${email.slice(at)}`;
}

interface MemberRow {
  userId: string;
  role: string;
  joinedAt: Date;
  user: { name: string; email: string; image?: string | null };
}

/**
 * A member as both Engram (`name`, `email`) and the Memax SDK (`user_name`,
 * `user_email`, `user_avatar_url`) read it. E-mail addresses go to the hub's
 * owner and admins, and to each member for their own row; others see them masked.
 */
export function serializeMember(row: MemberRow, viewer: { id: string; role: Role | undefined }): MemberObject {
  const email = seesMemberEmails(viewer.role) || row.userId === viewer.id ? row.user.email : maskEmail(row.user.email);
  return {
    user_id: row.userId,
    role: row.role,
    name: row.user.name,
    email,
    user_name: row.user.name,
    user_email: email,
    user_avatar_url: row.user.image ?? "",
    joined_at: row.joinedAt.toISOString(),
  };
}

/** The user fields serializeMember reads. */
export const memberUserSelect = { select: { name: true, email: true, image: true } } as const;

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

export function serializeTransfer(row: TransferRow, now: Date): TransferObject {
  const state = transferState(row, now);
  const resolvedAt = row.resolvedAt?.toISOString() ?? null;
  return {
    id: row.id,
    hub_id: row.hubId,
    from_user_id: row.fromUserId,
    initiated_by: row.fromUserId,
    target_user_id: row.targetUserId,
    state,
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt.toISOString(),
    resolved_at: resolvedAt,
    accepted_at: state === "accepted" ? resolvedAt : null,
    cancelled_at: state === "canceled" ? resolvedAt : null,
  };
}

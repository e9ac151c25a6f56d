import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { clampInstant } from "@/lib/api/timestamp.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { isUuid, normalizeId } from "@/lib/ids.ts";
import { refreshOnboarding } from "@/lib/onboarding/refresh-onboarding.ts";
import { DECISION_KINDS, NOTIFICATION_KINDS, NOTIFICATION_STATUSES, RECEIPT_KINDS } from "./notification-kinds.ts";
import { serializeNotification } from "./serialize-notification.ts";
import type { NotificationSummary } from "./notification-object.ts";

/** The API's list rule (decisions.md: default 20, larger values clamped to 100), as for every other list. */
export const NOTIFICATIONS_DEFAULT_LIMIT = 20;
export const NOTIFICATIONS_MAX_LIMIT = 100;

export interface ListNotificationsInput {
  hub?: string;
  status?: string;
  kinds?: string[];
  /** Memax's history filter: how resolved rows were resolved (any status may be asked; only resolved rows have one). */
  resolutions?: string[];
  unseenOnly?: boolean;
  since?: string;
  limit?: string | null;
  cursor?: string;
}

/**
 * `refresh: false` reads without bringing the onboarding checklist up to date first: a HEAD (Next runs
 * GET for it) reads nothing, so it writes nothing either.
 */
export interface ReadOptions {
  refresh?: boolean;
}

const invalid = (path: string, message: string) => new ApiError("invalid_request", `Query is invalid: ${path}: ${message}`, { issues: [{ path, message }] });

/**
 * The rows the caller may see at all: those about no hub, about a hub they are a member of, and the
 * invites addressed to them. A row about a hub they left (or were removed from) names the hub, its
 * members and its memories' titles, so it goes with the access, whatever its state; one a fan-out
 * wrote just after they left (its reading of the members came first) is hidden as well.
 */
export async function visibleNotifications(ctx: AuthContext): Promise<Prisma.NotificationWhereInput> {
  const memberships = await ctx.db.hubMember.findMany({ where: { userId: ctx.user.id }, select: { hubId: true } });
  return { OR: [{ hubId: null }, { kind: "hub_invite" }, { hubId: { in: memberships.map((m) => m.hubId) } }] };
}

/** The where clause shared by the list, the summary and the bulk updates. */
export async function notificationScope(ctx: AuthContext, input: { hub?: string; status?: string; kinds?: string[]; since?: string }): Promise<Prisma.NotificationWhereInput> {
  const now = ctx.now();
  if (input.hub !== undefined && !isUuid(input.hub)) throw invalid("hub", "must be a hub id");
  if (input.status !== undefined && !(NOTIFICATION_STATUSES as readonly string[]).includes(input.status)) {
    throw invalid("status", `one of ${NOTIFICATION_STATUSES.join(", ")}`);
  }
  let since: Date | undefined;
  if (input.since !== undefined) {
    since = new Date(input.since);
    if (Number.isNaN(since.getTime())) throw invalid("since", "must be an RFC 3339 timestamp");
    // Date reads years the database cannot store ("0000-…", "-010000-…"): a 500 there, "everything" here.
    since = clampInstant(since);
  }
  const status = input.status ?? "pending";
  const live = { OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] };
  const byStatus: Prisma.NotificationWhereInput =
    status === "pending"
      ? { status: "pending", ...live }
      : status === "expired"
        ? { OR: [{ status: "expired" }, { status: "pending", expiresAt: { lte: now } }] }
        : { status };
  const hubIds = ctx.credential.hubIds;
  return {
    userId: ctx.user.id,
    ...(input.hub && { hubId: normalizeId(input.hub) }),

    ...(input.kinds?.length && { kind: { in: input.kinds } }),
    ...(since && { createdAt: { gte: since } }),
    // A key limited to some hubs sees only their notifications (and those about no hub).
    AND: [byStatus, await visibleNotifications(ctx), ...(hubIds ? [{ OR: [{ hubId: null }, { hubId: { in: [...hubIds] } }] }] : [])],
  };
}

/** GET /v1/notifications: the caller's rows, newest first (default: pending ones). */
export async function listNotifications(ctx: AuthContext, input: ListNotificationsInput, { refresh = true }: ReadOptions = {}) {
  if (refresh) await refreshOnboarding(ctx);
  const limit = parseLimit(input.limit, NOTIFICATIONS_DEFAULT_LIMIT, NOTIFICATIONS_MAX_LIMIT);
  const secret = await serverSecret(ctx.db);
  const list = `notifications:${input.hub === undefined ? "" : normalizeId(input.hub)}:${input.status ?? "pending"}:${(input.kinds ?? []).join(",")}:${(input.resolutions ?? []).join(",")}:${input.unseenOnly ? 1 : 0}`;
  const after = input.cursor ? decodeCursor(secret, list, ctx.user.id, input.cursor, z.tuple([z.iso.datetime(), z.uuid()])) : null;
  const where: Prisma.NotificationWhereInput = {
    ...(await notificationScope(ctx, input)),
    ...(input.resolutions?.length && { resolution: { in: input.resolutions } }),
    ...(input.unseenOnly && { seenAt: null }),
    ...(after && {
      OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }],
    }),
  };
  const rows = await ctx.db.notification.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: limit + 1 });
  const now = ctx.now();
  const result = page("notifications", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return { ...result, notifications: result.notifications.map((row) => serializeNotification(row, now)) };
}

/** GET /v1/notifications/summary: badge counts, every known kind present (zeros included). */
export async function notificationSummary(ctx: AuthContext, input: { hub?: string }, { refresh = true }: ReadOptions = {}): Promise<NotificationSummary> {
  if (refresh) await refreshOnboarding(ctx);
  // One statement, so both counts are of one moment: counted apart, a row that arrived (or was marked)
  // between them was unseen but not pending, a badge of more unseen than there are.
  const groups = await ctx.db.notification.groupBy({
    by: ["kind"],
    where: await notificationScope(ctx, { hub: input.hub, status: "pending" }),
    _count: { _all: true, seenAt: true },
  });
  const byKind: Record<string, { pending: number; unseen: number }> = {};
  for (const kind of NOTIFICATION_KINDS) byKind[kind] = { pending: 0, unseen: 0 };
  for (const g of groups) byKind[g.kind] = { pending: g._count._all, unseen: g._count._all - g._count.seenAt };
  const sum = (kinds: readonly string[], field: "pending" | "unseen") => kinds.reduce((n, k) => n + (byKind[k]?.[field] ?? 0), 0);
  const receipts = Object.keys(byKind).filter((k) => !(DECISION_KINDS as readonly string[]).includes(k));
  return {
    needs_action_pending: sum(DECISION_KINDS, "pending"),
    needs_action_unseen: sum(DECISION_KINDS, "unseen"),
    updates_pending: sum(receipts, "pending"),
    updates_unseen: sum(receipts, "unseen"),
    unseen_total: sum(Object.keys(byKind), "unseen"),
    by_kind: byKind,
  };
}

export { RECEIPT_KINDS };

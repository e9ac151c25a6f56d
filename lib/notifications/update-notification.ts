import { z } from "zod";
import { timestampSchema } from "@/lib/api/timestamp.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { acceptTransfer } from "@/lib/hubs/accept-transfer.ts";
import { cancelTransfer } from "@/lib/hubs/cancel-transfer.ts";
import { resolveDreamAction } from "@/lib/dreams/undo-dream-action.ts";
import { credentialReaches } from "@/lib/hubs/hub-access.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { isUuid, uuidField } from "@/lib/ids.ts";
import { resolveDecisionGate } from "@/lib/boards/resolve-board-slot.ts";
import { gateOptions, gateSlotKey } from "@/lib/boards/serialize-board.ts";
import { acceptInvite } from "@/lib/invites/accept-invite.ts";
import { revealInviteToken } from "@/lib/invites/invite-token.ts";
import { isDecisionKind, RESOLVE_ACTIONS } from "./notification-kinds.ts";
import { effectiveStatus } from "./serialize-notification.ts";
import { notificationScope, visibleNotifications } from "./list-notifications.ts";

export async function ownNotificationOrThrow(ctx: AuthContext, id: string) {
  const row = isUuid(id) ? await ctx.db.notification.findFirst({ where: { id, userId: ctx.user.id, AND: [await visibleNotifications(ctx)] } }) : null;
  // A key limited to some hubs does not see notifications about the others.
  if (!row || (row.hubId && !credentialReaches(ctx.credential, row.hubId))) throw new ApiError("not_found", "Notification not found");
  return row;
}

/** POST /v1/notifications/:id/seen — idempotent; the first time is kept. */
export async function markNotificationSeen(ctx: AuthContext, id: string) {
  const row = await ownNotificationOrThrow(ctx, id);
  if (!row.seenAt) await ctx.db.notification.updateMany({ where: { id: row.id, seenAt: null }, data: { seenAt: ctx.now() } });
  return { status: "seen" as const };
}

/** POST /v1/notifications/:id/dismiss — receipts only; a decision is taken through /resolve. */
export async function dismissNotification(ctx: AuthContext, id: string) {
  const row = await ownNotificationOrThrow(ctx, id);
  if (isDecisionKind(row.kind)) {
    throw new ApiError("dismiss_not_applicable_to_decision", `A ${row.kind} notification needs a decision: POST /v1/notifications/${row.id}/resolve`, {
      actions: Object.keys(RESOLVE_ACTIONS[row.kind] ?? {}),
    });
  }
  const now = ctx.now();
  if (row.status === "pending") {
    await ctx.db.notification.updateMany({ where: { id: row.id, status: "pending" }, data: { status: "dismissed", resolvedAt: now, seenAt: row.seenAt ?? now } });
  }
  return { status: "dismissed" as const };
}

/**
 * POST /v1/notifications/:id/resolve {action} — takes the decision through the
 * same domain function as the direct API (accepting an invite joins the hub;
 * a transfer moves ownership; a review keeps one side), which also closes this row.
 */
export async function resolveNotification(ctx: AuthContext, id: string, action: string) {
  const row = await ownNotificationOrThrow(ctx, id);
  if (row.kind === "decision_gate") return resolveGateNotification(ctx, row, action);
  const allowed = Object.hasOwn(RESOLVE_ACTIONS, row.kind) ? RESOLVE_ACTIONS[row.kind] : undefined;
  // Own keys only: "toString" or "__proto__" found the object's built-ins, ran the domain call as if a
  // real action (a transfer declined, a review kept as B) and then failed to store them (a 500).
  const resolution = allowed && Object.hasOwn(allowed, action) ? allowed[action] : undefined;
  if (!allowed || !resolution) {
    throw new ApiError("invalid_action_for_notification_kind", `"${action}" is not an action of a ${row.kind} notification`, {
      actions: Object.keys(allowed ?? {}),
    });
  }
  const now = ctx.now();
  const status = effectiveStatus(row, now);
  if (status === "expired") throw new ApiError("expired", "This notification has expired");
  if (status !== "pending") throw new ApiError("conflict", `This notification is already ${status}`, { status, resolution: row.resolution });

  let closedByDomain = true;
  if (row.kind === "hub_invite" && action === "accept") {
    const invite = row.sourceId && isUuid(row.sourceId) ? await ctx.db.invite.findUnique({ where: { id: row.sourceId } }) : null;
    const token = invite && revealInviteToken(await serverSecret(ctx.db), invite.tokenEncrypted, invite.tokenHash);
    if (!invite || !token) throw new ApiError("revoked", "This invite is no longer valid");
    await acceptInvite(ctx, token);
  } else if (row.kind === "hub_ownership_transfer" && row.hubId && row.sourceId && action !== "dismiss") {
    if (action === "accept") await acceptTransfer(ctx, row.hubId, row.sourceId);
    else await cancelTransfer(ctx, row.hubId, row.sourceId);
  } else if (row.kind === "review_contradiction" && row.sourceId && action !== "dismiss") {
    // The same decision as POST /v1/dreams/actions/:id/resolve, which closes every recipient's row. Memax's
    // clients resolve here and cannot send a version: a side edited since the flag is archived as chosen.
    await resolveDreamAction(ctx, row.sourceId, action as "keep_a" | "keep_b" | "keep_both", undefined, false);
  } else {
    closedByDomain = false;
  }
  // The domain call above closed the row when it had one; otherwise (decline an invite, dismiss) close it here,
  // under the lock a checklist's item ticks take: a tick resolving the checklist by itself (applied_auto) after
  // this dismissal read it pending overwrote the dismissal, and one landing first must make this a 409, not a
  // 200 for a dismissal that was never stored.
  await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `notification:${row.id}`);
    const closed = await tx.notification.updateMany({ where: { id: row.id, status: "pending" }, data: { status: "resolved", resolution, resolvedAt: now, seenAt: row.seenAt ?? now } });
    if (closed.count === 0 && !closedByDomain) {
      const current = await tx.notification.findUniqueOrThrow({ where: { id: row.id }, select: { status: true, resolution: true } });
      throw new ApiError("conflict", `This notification is already ${current.status}`, { status: current.status, resolution: current.resolution });
    }
  });
  return { status: "resolved", action, resolution };
}

/** POST /v1/notifications/seen and /dismiss {kinds, since, hub} — receipts only. */
/** Body of POST /v1/notifications/seen and /dismiss (bulk, receipt kinds only). */
export const bulkNotificationsBodySchema = z.object({
  kinds: z.array(z.string().min(1).max(64)).min(1, "name at least one kind").max(50),
  since: timestampSchema("since must be an RFC 3339 timestamp").optional(),
  hub: uuidField().optional(),
});

/** The `hub` field narrows; without it the X-Hub-ID header (as withAuth parsed it) does. */
export async function bulkUpdateNotifications(ctx: AuthContext, op: "seen" | "dismiss", input: { hub?: string; kinds: string[]; since?: string }) {
  const decisions = input.kinds.filter(isDecisionKind);
  if (decisions.length) {
    throw new ApiError("bulk_not_allowed_for_decision_kind", `Decisions are taken one by one: ${decisions.join(", ")}`, { kinds: decisions });
  }
  const now = ctx.now();
  const scope = await notificationScope(ctx, { hub: input.hub ?? ctx.hubHeader, kinds: input.kinds, since: input.since });
  if (op === "seen") {
    const { count } = await ctx.db.notification.updateMany({ where: { ...scope, seenAt: null }, data: { seenAt: now } });
    return { affected: count };
  }
  // A dismissal marks the row seen too, as the single dismiss does (a dismissed row left unseen read as
  // never seen), keeping an earlier seen_at: the unseen rows first, then the rest of the scope.
  const count = await ctx.db.$transaction(async (tx) => {
    const unseen = await tx.notification.updateMany({ where: { ...scope, seenAt: null }, data: { status: "dismissed", resolvedAt: now, seenAt: now } });
    const seen = await tx.notification.updateMany({ where: { ...scope, seenAt: { not: null } }, data: { status: "dismissed", resolvedAt: now } });
    return unseen.count + seen.count;
  });
  return { affected: count };
}

/** POST /v1/notifications/{id}/resolve: the action to take (accept, decline, …). */
export const resolveNotificationBodySchema = z.object({ action: z.string().min(1, "action is required").max(64) });

/**
 * A decision gate from the bell: an option's id answers it, dismiss dismisses it, both through the
 * board's resolve (which writes the answer's memory and closes this row). A gate someone settled
 * differently in the meantime (on the board, or another option) is a 409 with what happened.
 */
async function resolveGateNotification(ctx: AuthContext, row: { hubId: string | null; sourceId: string | null; status: string; expiresAt: Date | null }, action: string) {
  const status = effectiveStatus(row, ctx.now());
  if (status === "expired") throw new ApiError("expired", "This notification has expired");
  if (status !== "pending") throw new ApiError("conflict", `This notification is already ${status}`, { status });
  const gate = row.hubId && row.sourceId && isUuid(row.sourceId) ? await ctx.db.decisionGate.findFirst({ where: { id: row.sourceId, hubId: row.hubId } }) : null;
  if (!gate) throw new ApiError("not_found", "The decision behind this notification is gone");
  const actions = [...gateOptions(gate).map((option) => option.id), "dismiss"];
  if (!actions.includes(action)) {
    throw new ApiError("invalid_action_for_notification_kind", `"${action}" is not an action of a decision_gate notification`, { actions });
  }
  const { slot } = await resolveDecisionGate(ctx, gate.hubId, gateSlotKey(gate.id), action === "dismiss" ? { action: "dismiss" } : { action: "choose", choice: action });
  const resolution = action === "dismiss" ? "dismissed" : `chose_${action}`;
  const settled = slot.state === "dismissed" ? "dismissed" : `chose_${slot.payload.chosen?.id}`;
  if (settled !== resolution) throw new ApiError("conflict", "Someone settled this decision already", { status: "resolved", resolution: settled });
  return { status: "resolved", action, resolution };
}

import type { DbClient } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { createNotification } from "./create-notification.ts";

/**
 * The notifications (and events) each hub, invite, transfer and processing
 * operation records, so those operations add one line inside their own
 * transaction. Everything here runs in the caller's transaction.
 */

interface HubRef {
  id: string;
  name: string;
}

async function person(tx: DbClient, id: string) {
  const user = await tx.user.findUnique({ where: { id }, select: { id: true, name: true, image: true } });
  return { id, display: user?.name ?? "", ...(user?.image && { avatar_url: user.image }) };
}

/** Marks pending decision rows about `source` as resolved (the decision was taken elsewhere: link, API, dashboard). */
async function resolvePending(tx: DbClient, where: { kind: string; sourceId: string; userId?: string }, resolution: string, now: Date) {
  await tx.notification.updateMany({ where: { ...where, status: "pending" }, data: { status: "resolved", resolution, resolvedAt: now } });
}

/**
 * Someone left or was removed from a hub: their pending rows about it (updates, contradictions to
 * review, an offer of ownership) can no longer be read or acted on, so they expire.
 */
export async function onAccessEnded(tx: DbClient, hubId: string, userId: string, now: Date) {
  await tx.notification.updateMany({ where: { hubId, userId, status: "pending" }, data: { status: "expired", resolvedAt: now } });
}

/**
 * A member's role changed so that they may no longer decide the hub's contradiction reviews: their open
 * review rows expire, as those of a member who left do (resolving one answered 403). Call under the
 * hub's membership lock, with the role already written.
 */
export async function onReviewRightsLost(tx: DbClient, hubId: string, userId: string, now: Date) {
  await tx.notification.updateMany({ where: { hubId, userId, kind: "review_contradiction", status: "pending" }, data: { status: "expired", resolvedAt: now } });
}

/**
 * The hub stopped letting contributors dream: the open review rows of its members below admin (admins
 * demoted while it let them decide) are decisions they can no longer take, and expire. Call inside the
 * settings change, under the hub's membership lock (a change of role waits for it).
 */
export async function onContributorDreamsOff(tx: DbClient, hubId: string, now: Date) {
  await tx.$executeRaw`
    UPDATE notifications n SET status = 'expired', resolved_at = ${now}
     WHERE n.hub_id = ${hubId}::uuid AND n.kind = 'review_contradiction' AND n.status = 'pending'
       AND EXISTS (SELECT 1 FROM hub_members m WHERE m.hub_id = n.hub_id AND m.user_id = n.user_id AND m.role NOT IN ('owner', 'admin'))`;
}

/** A revoked invite closes the invitee's decision (accepting it would only answer 410). */
export async function onInviteRevoked(tx: DbClient, inviteId: string, now: Date) {
  await tx.notification.updateMany({ where: { kind: "hub_invite", sourceId: inviteId, status: "pending" }, data: { status: "expired", resolvedAt: now } });
}

/**
 * A regenerated invite (a new link, a fresh 7-day expiry, the regenerator as its maker): the
 * invitee's open decision row says so, and one that had run out with the old expiry is live again.
 * Without this the row kept the old expiry, so the person lost the in-app way to accept a link
 * that still worked. The row becomes the regenerator's, so it is counted against their cap as a new
 * one would be: past it the row is left as it was (one that had run out stays out of the inbox).
 */
export async function onInviteRegenerated(tx: DbClient, invite: { id: string; expiresAt: Date; createdBy: string }, now: Date) {
  const rows = await tx.notification.findMany({
    where: { kind: "hub_invite", sourceId: invite.id, status: "pending" },
    select: { id: true, userId: true, payload: true },
    orderBy: { userId: "asc" },
  });
  if (rows.length === 0) return;
  const inviter = await person(tx, invite.createdBy);
  for (const row of rows) {
    await lockForTransaction(tx, `invite-notifications:${row.userId}`);
    if (await inviterAtCap(tx, row.userId, invite.createdBy, now, { id: row.id })) continue;
    const payload = { ...(row.payload as Record<string, unknown>), inviter, expires_at: invite.expiresAt.toISOString() };
    // Read before the lock: an invite into the same hub may have replaced (deleted) the row meanwhile,
    // which leaves nothing to renew here (an update of a missing row threw, failing the regenerate).
    await tx.notification.updateMany({ where: { id: row.id, status: "pending" }, data: { expiresAt: invite.expiresAt, payload } });
  }
}

/** A memory's processing gave up: `memory.processed` for the hub, a notification for its owner. */
export async function notifyProcessingFailed(tx: DbClient, memory: { id: string; hubId: string; ownerId: string; title: string }, reason: string) {
  await createNotification(tx, {
    userId: memory.ownerId,
    hubId: memory.hubId,
    kind: "memory_processing_failed",
    sourceKind: "memory",
    sourceId: memory.id,
    priority: 1,
    payload: { memory: { id: memory.id, title: memory.title }, error: reason.slice(0, 500) },
  });
  await emitEvent(tx, { type: "memory.processed", hubId: memory.hubId, entityId: memory.id });
}

/** Someone joined (added directly, or through an invite): `member.added`, and the hub's owner and admins hear of it. */
export async function onMemberJoined(tx: DbClient, input: { hub: HubRef; userId: string; role: string; actorId: string; now: Date; inviteId?: string }) {
  const managers = await tx.hubMember.findMany({ where: { hubId: input.hub.id, role: { in: ["owner", "admin"] } }, select: { userId: true } });
  const member = await person(tx, input.userId);
  for (const { userId } of managers) {
    if (userId === input.userId || userId === input.actorId) continue;
    await createNotification(tx, {
      userId,
      hubId: input.hub.id,
      kind: "hub_member_joined",
      sourceKind: "hub_member",
      sourceId: input.userId,
      actorId: input.actorId,
      payload: { hub: { id: input.hub.id, name: input.hub.name }, member, role: input.role },
      now: input.now,
    });
  }
  if (input.inviteId) {
    await resolvePending(tx, { kind: "hub_invite", sourceId: input.inviteId, userId: input.userId }, "accepted", input.now);
    await emitEvent(tx, { type: "invite.accepted", hubId: input.hub.id, actorId: input.userId, entityId: input.inviteId });
  }
  await emitEvent(tx, { type: "member.added", hubId: input.hub.id, actorId: input.actorId, entityId: input.userId });
}

/**
 * Live invite notifications one inviter may have in one person's inbox, across hubs. Each hub has
 * at most one per invitee (a newer invite replaces it), so this bounds what an admin of many hubs
 * can put there; the invites themselves (their links and e-mails) are untouched.
 */
export const MAX_INVITE_NOTIFICATIONS_PER_INVITER = 10;

/**
 * Whether `inviterId` already has the most live invite rows in `inviteeId`'s inbox, leaving out the
 * rows `except` matches (the one about to be replaced or rewritten). Call under `invite-notifications:`.
 */
async function inviterAtCap(tx: DbClient, inviteeId: string, inviterId: string, at: Date, except: Prisma.NotificationWhereInput) {
  const live = await tx.notification.count({
    where: {
      userId: inviteeId,
      kind: "hub_invite",
      status: "pending",
      OR: [{ expiresAt: null }, { expiresAt: { gt: at } }],
      payload: { path: ["inviter", "id"], equals: inviterId },
      NOT: except,
    },
  });
  return live >= MAX_INVITE_NOTIFICATIONS_PER_INVITER;
}

/**
 * An invite addressed to an existing account (by user id, or by its e-mail) lands in that person's
 * notifications: one row per hub, replacing any earlier one (revoked, declined or still open — the
 * newest invite is the one to act on), so invite/revoke loops cannot pile rows up; and at most
 * MAX_INVITE_NOTIFICATIONS_PER_INVITER live ones from one inviter (past that, the earlier row stays).
 */
export async function onInviteCreated(
  tx: DbClient,
  invite: { id: string; hubId: string; role: string; email: string | null; createdAt: Date; expiresAt: Date; createdBy: string },
  hub: HubRef,
  inviteeUserId?: string | null,
) {
  const invitee = inviteeUserId
    ? { id: inviteeUserId }
    : invite.email
      ? // Only an account that proved the address: a password sign-up may hold someone else's, and
        // would otherwise read the invite and accept it in-app without the mailbox's link.
        await tx.user.findFirst({ where: { email: invite.email.toLowerCase(), emailUnverified: false }, select: { id: true } })
      : null;
  if (!invitee || invitee.id === invite.createdBy) return;
  if (await tx.hubMember.findUnique({ where: { hubId_userId: { hubId: hub.id, userId: invitee.id } } })) return;
  // Invites in different hubs do not share the hub's invite lock: this one makes the inviter's count exact.
  await lockForTransaction(tx, `invite-notifications:${invitee.id}`);
  // This hub's row would be replaced, so it does not count; but it goes only once the new one is sure to be
  // made: past the cap it may be another admin's invite, still the one to act on.
  if (await inviterAtCap(tx, invitee.id, invite.createdBy, invite.createdAt, { hubId: hub.id })) return;
  await tx.notification.deleteMany({ where: { userId: invitee.id, hubId: hub.id, kind: "hub_invite" } });
  await createNotification(tx, {
    userId: invitee.id,
    hubId: hub.id,
    kind: "hub_invite",
    sourceKind: "invite",
    sourceId: invite.id,
    priority: 2,
    actorId: invite.createdBy,
    expiresAt: invite.expiresAt,
    payload: { hub: { id: hub.id, name: hub.name }, inviter: await person(tx, invite.createdBy), role: invite.role, expires_at: invite.expiresAt.toISOString() },
  });
}

/** An ownership offer: `transfer.created` for the hub, a decision for its target. */
export async function onTransferCreated(
  tx: DbClient,
  transfer: { id: string; hubId: string; fromUserId: string; targetUserId: string; expiresAt: Date },
  hub: HubRef,
) {
  await createNotification(tx, {
    userId: transfer.targetUserId,
    hubId: hub.id,
    kind: "hub_ownership_transfer",
    sourceKind: "transfer",
    sourceId: transfer.id,
    priority: 2,
    actorId: transfer.fromUserId,
    expiresAt: transfer.expiresAt,
    payload: { hub: { id: hub.id, name: hub.name }, initiator: await person(tx, transfer.fromUserId), role: "owner", expires_at: transfer.expiresAt.toISOString() },
  });
  await emitEvent(tx, { type: "transfer.created", hubId: hub.id, actorId: transfer.fromUserId, entityId: transfer.id });
}

/** An offer accepted (the previous owner hears of it) or canceled/declined (the target's decision row closes). */
export async function onTransferResolved(
  tx: DbClient,
  transfer: { id: string; hubId: string; fromUserId: string; targetUserId: string },
  hub: HubRef,
  outcome: "accepted" | "canceled",
  actorId: string,
  now: Date,
) {
  await resolvePending(tx, { kind: "hub_ownership_transfer", sourceId: transfer.id }, outcome === "accepted" ? "accepted" : "declined", now);
  if (outcome === "accepted") {
    const [newOwner, oldOwner] = [await person(tx, transfer.targetUserId), await person(tx, transfer.fromUserId)];
    {
      await createNotification(tx, {
        userId: transfer.fromUserId,
        hubId: hub.id,
        kind: "hub_ownership_transferred",
        sourceKind: "transfer",
        sourceId: transfer.id,
        actorId,
        payload: { hub: { id: hub.id, name: hub.name }, new_owner: newOwner, old_owner: oldOwner },
        now,
      });
    }
  }
  await emitEvent(tx, { type: outcome === "accepted" ? "transfer.accepted" : "transfer.canceled", hubId: hub.id, actorId, entityId: transfer.id });
}

/** A dream's contradiction review, as written to dream_actions. */
export interface ContradictionReview {
  id: string;
  runId: string;
  hubId: string;
  reason: string;
  similarity: number;
  a: { id: string; title: string };
  b: { id: string; title: string };
}

/** What a review's row tells (Memax's `ReviewContradictionPayload`). */
function reviewPayload(hub: HubRef, review: ContradictionReview) {
  return {
    hub: { id: hub.id, name: hub.name },
    dream_run_id: review.runId,
    memory_a: review.a,
    memory_b: review.b,
    similarity: review.similarity,
    reason: review.reason,
  };
}

async function createReviewRow(tx: DbClient, userId: string, hubId: string, actionId: string, payload: Record<string, unknown>, now: Date) {
  await createNotification(tx, { userId, hubId, kind: "review_contradiction", sourceKind: "dream_action", sourceId: actionId, priority: 1, payload, now });
}

/**
 * A dream flagged contradictions: each of the hub's owner and admins gets one
 * `review_contradiction` decision per review (keep A / keep B / keep both),
 * resolved through the dream's resolve route or the notification's.
 */
export async function onContradictionsFlagged(tx: DbClient, hub: HubRef, reviews: ContradictionReview[], now: Date) {
  if (reviews.length === 0) return;
  const managers = await tx.hubMember.findMany({ where: { hubId: hub.id, role: { in: ["owner", "admin"] } }, select: { userId: true } });
  for (const review of reviews) {
    for (const { userId } of managers) {
      await createReviewRow(tx, userId, hub.id, review.id, reviewPayload(hub, review), now);
    }
  }
}

/** A review was decided (by anyone, through either route): every recipient's row closes with that resolution. */
export async function onReviewResolved(tx: DbClient, actionId: string, resolution: string, now: Date) {
  await resolvePending(tx, { kind: "review_contradiction", sourceId: actionId }, resolution, now);
}

/**
 * A decided review was undone: it is open again for the hub's owners and admins of now, as a review is
 * flagged for them. Their rows closed by that decision are pending again (dismissed ones stay
 * dismissed), and so are those that expired when they lost the role (demoted, or gone) before being
 * made managers again; a manager with no row of it (promoted since the flag, or theirs pruned) gets one,
 * as the flag wrote it (one review's, for each manager: bounded by the hub's members). The rows of members
 * below admin who may still decide it (contributors, while the hub's allow_contributor_dreams is on: a
 * demoted admin's row stays pending with the demotion too) are pending again as well, though none is
 * written for them. Any other row closed by the decision is one its member may no longer take (resolving
 * it is a 403): it expires. Left `resolved / kept_a`, it told of a decision the review no longer had,
 * and a later decision, closing pending rows only, never set it right. The caller holds the hub's
 * membership lock, so the roles (and the hub's setting, changed under that lock) read here stand until
 * commit, and has checked that both memories are still in the hub.
 */
export async function onReviewReopened(tx: DbClient, actionId: string, hubId: string, now: Date) {
  const { allowContributorDreams } = await tx.hub.findUniqueOrThrow({ where: { id: hubId }, select: { allowContributorDreams: true } });
  const deciders = await tx.hubMember.findMany({ where: { hubId, role: { in: allowContributorDreams ? ["owner", "admin", "contributor"] : ["owner", "admin"] } }, select: { userId: true, role: true } });
  const managers = deciders.flatMap((m) => (m.role === "owner" || m.role === "admin" ? [m.userId] : []));
  const review = { kind: "review_contradiction", sourceId: actionId };
  const decided = { ...review, status: "resolved", resolution: { in: ["kept_a", "kept_b", "kept_both"] } };
  await tx.notification.updateMany({
    where: { ...review, userId: { in: deciders.map((m) => m.userId) }, OR: [decided, { status: "expired", resolution: null }] },
    data: { status: "pending", resolution: null, resolvedAt: null },
  });
  await tx.notification.updateMany({ where: { ...decided, userId: { notIn: deciders.map((m) => m.userId) } }, data: { status: "expired", resolution: null, resolvedAt: now } });
  const rows = await tx.notification.findMany({ where: review, select: { userId: true, payload: true } });
  const missing = managers.filter((userId) => !rows.some((row) => row.userId === userId));
  if (missing.length === 0) return;
  // Every row of a review tells the same (a delete's or a move's clean-up rewrites them all).
  const payload = (rows[0]?.payload as Record<string, unknown> | undefined) ?? (await payloadOfReview(tx, actionId, hubId));
  for (const userId of missing) await createReviewRow(tx, userId, hubId, actionId, payload, now);
}

/** A review's row written anew from the action, when none of its rows is left to copy. */
async function payloadOfReview(tx: DbClient, actionId: string, hubId: string) {
  const action = await tx.dreamAction.findUniqueOrThrow({ where: { id: actionId }, select: { runId: true, reason: true, similarity: true, sourceMemoryIds: true } });
  const hub = await tx.hub.findUniqueOrThrow({ where: { id: hubId }, select: { id: true, name: true } });
  const [a, b] = action.sourceMemoryIds as [string, string];
  const memories = await tx.memory.findMany({ where: { id: { in: [a, b] }, hubId }, select: { id: true, title: true } });
  const side = (id: string) => ({ id, title: memories.find((m) => m.id === id)?.title ?? "" });
  return reviewPayload(hub, { id: actionId, runId: action.runId, hubId, reason: action.reason, similarity: action.similarity ?? 0, a: side(a), b: side(b) });
}

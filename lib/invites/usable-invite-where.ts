import type { Prisma } from "@/lib/db/generated/client.ts";

/**
 * Invites of the hub that still admit someone: active, not expired, and made by a member who may
 * still grant the role (the rule of roleCanGrant, as a query). A link of an admin who has left or been
 * demoted answers 410 on accept, so it must not hold one of the hub's MAX_ACTIVE_INVITES slots either:
 * otherwise a departed admin's links would block the remaining admins from inviting for up to 7 days.
 */
export function usableInviteWhere(hubId: string, now: Date): Prisma.InviteWhereInput {
  const makerIs = (roles: string[]) => ({ creator: { memberships: { some: { hubId, role: { in: roles } } } } });
  return {
    hubId,
    state: "active",
    expiresAt: { gt: now },
    OR: [
      { role: "admin", ...makerIs(["owner"]) },
      { role: { not: "admin" }, ...makerIs(["owner", "admin"]) },
    ],
  };
}

/** Active, unexpired invites whose maker can no longer grant them (see usableInviteWhere). */
export function orphanedInviteWhere(hubId: string, now: Date): Prisma.InviteWhereInput {
  return { hubId, state: "active", expiresAt: { gt: now }, NOT: { OR: usableInviteWhere(hubId, now).OR } };
}

import { ApiError } from "@/lib/api/errors.ts";
import { can, isRole, type Role } from "@/lib/api/permissions.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { Invite } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { inviteState } from "./serialize-invite.ts";

/** An invite of this hub (the caller's membership is checked before). */
export async function inviteOrThrow(db: DbClient, hubId: string, inviteId: string): Promise<Invite> {
  const invite = isUuid(inviteId) ? await db.invite.findFirst({ where: { id: inviteId, hubId } }) : null;
  if (!invite) throw new ApiError("not_found", "Invite not found");
  return invite;
}

/**
 * An invite of this hub that the caller's role may regenerate or resend: an admin invite
 * only by whoever may manage admins (the owner), as for creating one.
 */
export async function managedInviteOrThrow(db: DbClient, hubId: string, role: Role, inviteId: string): Promise<Invite> {
  const invite = await inviteOrThrow(db, hubId, inviteId);
  if (invite.role === "admin" && !can(role, "admins.manage")) throw new ApiError("forbidden", "Only the hub owner can manage admin invites");
  return invite;
}

/** 410 for an invite that can no longer be used: revoked, used (accepted) or expired. */
export function assertInviteUsable(invite: Pick<Invite, "state" | "expiresAt">, now: Date, allowExpired = false): void {
  const state = inviteState(invite, now);
  if (state === "revoked") throw new ApiError("revoked", "This invite was revoked", { state });
  if (state === "accepted") throw new ApiError("used", "This invite has already been used", { state });
  if (state === "expired" && !allowExpired) throw new ApiError("expired", "This invite has expired; ask for a new one", { state });
}

/**
 * An invite speaks for the member who made it, so it counts only while they may still grant its role:
 * an admin removed (or an owner who handed the hub over) cannot walk back in, or let others in as
 * admins, through a link made before. Read under the hub's membership lock (shared), which removals
 * and demotions take exclusively, so one committing now is seen.
 */
export async function assertMakerCanGrant(
  tx: DbClient,
  invite: Pick<Invite, "hubId" | "createdBy" | "role">,
  message = "This invite no longer counts: the member who made it can no longer invite to this hub with this role",
): Promise<void> {
  if (!(await makerCanGrant(tx, invite))) throw new ApiError("revoked", message);
}

/** Whether the invite's maker may still grant its role (see assertMakerCanGrant). */
export async function makerCanGrant(db: DbClient, invite: Pick<Invite, "hubId" | "createdBy" | "role">): Promise<boolean> {
  const maker = await db.hubMember.findUnique({ where: { hubId_userId: { hubId: invite.hubId, userId: invite.createdBy } }, select: { role: true } });
  return roleCanGrant(maker?.role, invite.role);
}

/** Whether a member with `makerRole` (undefined: no longer a member) may grant `inviteRole`. */
export function roleCanGrant(makerRole: string | undefined, inviteRole: string): boolean {
  return makerRole !== undefined && isRole(makerRole) && can(makerRole, inviteRole === "admin" ? "admins.manage" : "hub.manage");
}

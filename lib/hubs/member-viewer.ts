import type { Role } from "@/lib/api/permissions.ts";
import { allows, type Membership } from "./hub-access.ts";

/**
 * Who reads a member list, as serializeMember masks it: members' addresses go to those who manage the
 * hub's members, so with a credential that may not (a connected app's token, whatever its user's role;
 * a read-only key) they stay masked: a third-party app never administers the hub, and has no need of them.
 */
export function memberViewer(userId: string, membership: Membership): { id: string; role: Role | undefined } {
  return { id: userId, role: allows(membership, "hub.manage") ? membership.role : undefined };
}

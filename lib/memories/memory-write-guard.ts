import type { Prisma } from "@/lib/db/generated/client.ts";
import { ROLE_PERMISSIONS, ROLES, type Permission, type Role } from "@/lib/api/permissions.ts";

const rolesWith = (permission: Permission): Role[] => ROLES.filter((role) => ROLE_PERMISSIONS[role].includes(permission));
const memberAs = (userId: string, roles: Role[]) => ({ members: { some: { userId, role: { in: roles } } } });

/**
 * The permission rules of canEditMemory / canDeleteMemory written as a WHERE clause, so the write
 * itself re-checks them (issue 18 #7): a role revoked, a hub policy changed or a memory moved between
 * the caller's check and the write makes the write match nothing instead of succeeding.
 */
export function memoryWriteGuard(userId: string, action: "edit" | "delete"): Prisma.MemoryWhereInput {
  const manage = { hub: memberAs(userId, rolesWith("memories.manage")) };
  if (action === "edit") {
    return { OR: [manage, { ownerId: userId, hub: memberAs(userId, rolesWith("memories.write")) }] };
  }
  return {
    OR: [
      manage,
      { hub: { contributorDeletePolicy: "any", ...memberAs(userId, ["contributor"]) } },
      { ownerId: userId, hub: { contributorDeletePolicy: "own", ...memberAs(userId, ["contributor"]) } },
    ],
  };
}

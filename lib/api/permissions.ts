export const ROLES = ["owner", "admin", "contributor", "viewer"] as const;
export type Role = (typeof ROLES)[number];
export const MANAGED_ROLES = ["admin", "contributor", "viewer"] as const;

export type Permission =
  | "memories.read" // read and recall memories, topics, members
  | "memories.write" // push memories; edit or delete own
  | "memories.manage" // edit, move or delete anyone's memory
  | "topics.manage"
  | "dreams.trigger"
  | "hub.manage" // settings, invites, contributor/viewer members
  | "admins.manage" // add, demote or remove admins
  | "hub.own"; // transfer ownership, delete the hub

/** The role table; contributor extras depend on the hub's settings (see `can`). */
export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  owner: ["memories.read", "memories.write", "memories.manage", "topics.manage", "dreams.trigger", "hub.manage", "admins.manage", "hub.own"],
  admin: ["memories.read", "memories.write", "memories.manage", "topics.manage", "dreams.trigger", "hub.manage"],
  contributor: ["memories.read", "memories.write"],
  viewer: ["memories.read"],
};

export interface HubPolicy {
  allowContributorTopics: boolean;
  allowContributorDreams: boolean;
  contributorDeletePolicy: string;
}

export function can(role: Role, permission: Permission, hub?: HubPolicy): boolean {
  if (ROLE_PERMISSIONS[role].includes(permission)) return true;
  if (role === "contributor" && hub) {
    if (permission === "topics.manage") return hub.allowContributorTopics;
    if (permission === "dreams.trigger") return hub.allowContributorDreams;
  }
  return false;
}

/** Whether `role` may delete a memory, given who owns it (decisions.md: contributor_delete_policy). */
export function canDeleteMemory(role: Role, isOwnMemory: boolean, hub: HubPolicy): boolean {
  if (can(role, "memories.manage")) return true;
  if (role !== "contributor") return false;
  if (hub.contributorDeletePolicy === "any") return true;
  if (hub.contributorDeletePolicy === "own") return isOwnMemory;
  return false;
}

/** Whether `role` may edit (or move) a memory. */
export function canEditMemory(role: Role, isOwnMemory: boolean): boolean {
  return can(role, "memories.manage") || (isOwnMemory && can(role, "memories.write"));
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}

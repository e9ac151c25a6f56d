import type { AuthContext, Credential, HubRecord } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { can, isRole, type Permission, type Role } from "@/lib/api/permissions.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient, SqlRunner } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { isUuid, normalizeId } from "@/lib/ids.ts";
import { CLI_CLIENT_ID } from "@/lib/oauth/cli-client.ts";

/**
 * The one hub-access resolver. Every question "may this caller, with this credential, do X in
 * hub H?" is answered here: withAuth (X-Hub-ID and the default hub), the hub/topic/invite domain
 * functions, memory lookups (findMemoryOrThrow, get), batch operations, lists and recall's scope.
 *
 * Two things decide: the caller's membership (role, read fresh on every request so changes apply
 * at once) and the credential (an API key may be limited to a hub allowlist and/or to reading).
 * A hub outside either is not found; a read-only credential acts as a viewer.
 */

// `db` may be a transaction: the same checks run inside a write's transaction.
type Caller = Pick<AuthContext, "user" | "credential"> & { db: DbClient };
// A request's own context, never a transaction's: its lookups run as plain statements on the pool.
type RequestCaller = Caller & Pick<AuthContext, "sql">;

export interface Membership {
  hub: HubRecord;
  /** The role this request acts with: the member's role, or viewer for a read-only credential. */
  role: Role;
  /** The member's role in the hub, whatever the credential. */
  memberRole: Role;
  /** The credential is a connected app's OAuth token: it works with memories, never administers the hub. */
  connectedApp: boolean;
}

/**
 * What a connected app (an OAuth access token, other than `memax login` with full access) may not do,
 * whatever its user's role: the consent page promises memories (recall, read, save, delete), and an
 * invite or a new admin made through an app would outlive revoking it.
 */
const HUB_ADMINISTRATION: readonly Permission[] = ["hub.manage", "admins.manage", "hub.own"];

/** `memax login` with every hub and write access consented: the CLI acts for its user in full. */
export function isSignedInCli(credential: Credential): boolean {
  return credential.oauth?.clientId === CLI_CLIENT_ID && credential.hubIds === null && credentialWrites(credential);
}

function isConnectedApp(credential: Credential): boolean {
  return credential.type === "access_token" && !isSignedInCli(credential);
}

/**
 * Changes to whom a user's hubs belong and which hubs they are in (accepting or canceling an ownership
 * transfer, accepting an invite, leaving) are the person's to make: not a connected app's, nor a key
 * limited to some hubs (which could join its user to hubs outside its own list).
 */
export function assertActsForAccount(credential: Credential, action: string): void {
  if (isConnectedApp(credential)) {
    throw new ApiError("forbidden", `A connected app (OAuth access token) cannot ${action}; use the dashboard, the CLI or an API key`);
  }
  if (credential.hubIds !== null) throw new ApiError("forbidden", `This API key is limited to some hubs; it cannot ${action}`);
}

/** Whether the credential may write at all (API keys issued with scopes: ["read"] may not). */
export function credentialWrites(credential: Credential): boolean {
  return credential.scopes.includes("write");
}

/** Whether the credential's hub allowlist (if any) includes this hub. */
export function credentialReaches(credential: Credential, hubId: string): boolean {
  return credential.hubIds === null || credential.hubIds.includes(hubId);
}

/** The role a member acts with under this credential. */
export function effectiveRole(credential: Credential, role: Role): Role {
  return credentialWrites(credential) ? role : "viewer";
}

function toMembership(credential: Credential, row: { role: string; hub: HubRecord }): Membership | undefined {
  if (!isRole(row.role) || !credentialReaches(credential, row.hub.id)) return undefined;
  return { hub: row.hub, role: effectiveRole(credential, row.role), memberRole: row.role, connectedApp: isConnectedApp(credential) };
}

/** Prisma filter for hub ids the credential reaches (combine with a membership condition). */
function allowlistWhere(credential: Credential): { hubId?: { in: string[] } } {
  return credential.hubIds === null ? {} : { hubId: { in: [...credential.hubIds] } };
}

/** Prisma filter: memories in hubs the caller belongs to and the credential reaches. */
export function memoryAccessWhere(ctx: Caller): Prisma.MemoryWhereInput {
  return { hub: { members: { some: { userId: ctx.user.id } } }, ...allowlistWhere(ctx.credential) };
}

/** memoryAccessWhere as SQL on the memory alias `m`, for plain statements; its parameters come first ($1, $2). */
export function memoryAccessSql(ctx: Caller): { where: string; params: unknown[] } {
  const member = "EXISTS (SELECT 1 FROM hub_members hm WHERE hm.hub_id = m.hub_id AND hm.user_id = $1::uuid)";
  if (ctx.credential.hubIds === null) return { where: member, params: [ctx.user.id] };
  return { where: `${member} AND m.hub_id = ANY($2::uuid[])`, params: [ctx.user.id, [...ctx.credential.hubIds]] };
}

/** Prisma filter: the caller's hub_members rows that the credential reaches. */
export function membershipWhere(ctx: Caller): Prisma.HubMemberWhereInput {
  return { userId: ctx.user.id, ...allowlistWhere(ctx.credential) };
}

/** Every hub the caller may read with this credential, with the role they act with: the scope of lists and recall. */
export async function readableHubs(ctx: Caller): Promise<Membership[]> {
  const rows = await ctx.db.hubMember.findMany({ where: membershipWhere(ctx), include: { hub: true } });
  return rows.flatMap((row) => toMembership(ctx.credential, row) ?? []);
}

/**
 * The hubs a list or search across hubs reads: the one `hubId` (its hub_id parameter) names, else
 * X-Hub-ID, else every hub the caller can read. A slug is 400 naming where it came from; a hub out
 * of reach is not found.
 */
export async function hubScopeIds(ctx: RequestCaller & Pick<AuthContext, "hubHeader">, hubId: string | undefined): Promise<string[]> {
  return (await hubScope(ctx, hubId, false)).hubIds;
}

/**
 * hubScopeIds with each hub's memory counter (storage_usage, kept by the memories triggers) when the
 * scope is every readable hub: read in the same statement, the memory list's total costs no statement
 * of its own (issue 16). `memories` is undefined for a scope of one hub.
 */
export async function hubScopeWithCounts(
  ctx: RequestCaller & Pick<AuthContext, "hubHeader">,
  hubId: string | undefined,
): Promise<{ hubIds: string[]; memories?: Map<string, number> }> {
  return hubScope(ctx, hubId, true);
}

async function hubScope(
  ctx: RequestCaller & Pick<AuthContext, "hubHeader">,
  hubId: string | undefined,
  withCounts: boolean,
): Promise<{ hubIds: string[]; memories?: Map<string, number> }> {
  const scoped = hubId ?? ctx.hubHeader;
  if (scoped === undefined) {
    // Every list and search without a hub comes here and needs only the ids: one plain statement
    // without the hubs (through Prisma with them, about 0.5 ms of the server's CPU; see membershipRows).
    const rows = await ctx.sql.query<{ hub_id: string; role: string; memories?: number }>(
      withCounts
        ? `SELECT m.hub_id::text AS hub_id, m.role, coalesce(u.memories, 0)::int AS memories
             FROM hub_members m LEFT JOIN storage_usage u ON u.scope = 'hub' AND u.scope_id = m.hub_id
            WHERE m.user_id = $1::uuid`
        : `SELECT hub_id::text AS hub_id, role FROM hub_members WHERE user_id = $1::uuid`,
      [ctx.user.id],
    );
    const reached = rows.filter((row) => isRole(row.role) && credentialReaches(ctx.credential, row.hub_id));
    return {
      hubIds: reached.map((row) => row.hub_id),
      ...(withCounts && { memories: new Map(reached.map((row) => [row.hub_id, Number(row.memories)])) }),
    };
  }
  if (!isUuid(scoped)) {
    const path = hubId !== undefined ? "hub_id" : "X-Hub-ID";
    throw new ApiError("invalid_request", `${path} must be a hub id (not a slug)`, { issues: [{ path, message: "not a hub id" }] });
  }
  return { hubIds: [(await requestMembershipOrThrow(ctx, scoped)).hub.id] };
}

/** The caller's membership of one hub; a hub they do not belong to (or the key does not reach) is simply not found. */
export async function membershipOrThrow(ctx: Caller, given: string): Promise<Membership> {
  // Prisma batches concurrent findUnique calls and matches their rows by the id's exact text: an
  // id in upper case would be found alone but missed among others.
  const hubId = normalizeId(given);
  const row = isUuid(hubId)
    ? await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId, userId: ctx.user.id } }, include: { hub: true } })
    : null;
  const membership = row ? toMembership(ctx.credential, row) : undefined;
  if (!membership) throw new ApiError("not_found", "Hub not found");
  return membership;
}

/** membershipOrThrow outside any transaction, as a plain statement (withAuth's X-Hub-ID, lists). */
async function requestMembershipOrThrow(ctx: RequestCaller, hubId: string): Promise<Membership> {
  const [row] = isUuid(hubId) ? await membershipRows(ctx.sql, "m.hub_id = $1::uuid AND m.user_id = $2::uuid", [hubId, ctx.user.id]) : [];
  const membership = row ? toMembership(ctx.credential, row) : undefined;
  if (!membership) throw new ApiError("not_found", "Hub not found");
  return membership;
}

/**
 * hub_members rows with their hub, read on the pool (never inside a transaction). Every hub route
 * resolves its hub first, so this is one plain statement: through Prisma's query engine the same
 * read cost 0.45–0.7 ms of the server's CPU (measured on PostgreSQL, 2026-11-28). Every HubRecord
 * field is mapped, as Prisma's `include: { hub: true }` gave them.
 */
async function membershipRows(sql: SqlRunner, where: string, params: unknown[]): Promise<{ role: string; hub: HubRecord }[]> {
  const rows = await sql.query<MembershipRow>(
    `SELECT m.role, h.id::text AS id, h.name, h.slug, h.hub_type, h.owner_id::text AS owner_id, h.allow_contributor_topics,
            h.allow_contributor_dreams, h.contributor_delete_policy, h.created_at, h.updated_at, h.icon, h.accent,
            h.header_aurora_mode, h.settings::text AS settings
       FROM hub_members m JOIN hubs h ON h.id = m.hub_id
      WHERE ${where}
      LIMIT 1`,
    params,
  );
  return rows.map((row) => ({
    role: row.role,
    hub: {
      id: row.id,
      name: row.name,
      slug: row.slug,
      hubType: row.hub_type,
      ownerId: row.owner_id,
      allowContributorTopics: row.allow_contributor_topics,
      allowContributorDreams: row.allow_contributor_dreams,
      contributorDeletePolicy: row.contributor_delete_policy,
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
      icon: row.icon,
      accent: row.accent,
      headerAuroraMode: row.header_aurora_mode,
      // Read as text and parsed here: the value Prisma gives, whichever driver and whatever JSON it holds.
      settings: JSON.parse(row.settings) as unknown,
    },
  }));
}

interface MembershipRow {
  role: string;
  id: string;
  name: string;
  slug: string;
  hub_type: string;
  owner_id: string;
  allow_contributor_topics: boolean;
  allow_contributor_dreams: boolean;
  contributor_delete_policy: string;
  created_at: Date | string;
  updated_at: Date | string;
  icon: string | null;
  accent: string | null;
  header_aurora_mode: string | null;
  settings: string;
}

/** Whether this membership grants `permission` under the request's credential. */
export function allows(membership: Membership, permission: Permission): boolean {
  if (membership.connectedApp && HUB_ADMINISTRATION.includes(permission)) return false;
  return can(membership.role, permission, membership.hub);
}

/** forbidden, naming the cause: the member's role, a read-only credential, or a connected app administering. */
export function forbiddenFor(membership: Membership, action: string, permission?: Permission): ApiError {
  if (membership.connectedApp && permission && HUB_ADMINISTRATION.includes(permission) && can(membership.role, permission, membership.hub)) {
    return new ApiError(
      "forbidden",
      `A connected app (OAuth access token) cannot ${action}: hub settings, members, invites and ownership are managed from the dashboard, the CLI or an API key`,
    );
  }
  if (membership.role !== membership.memberRole) {
    return new ApiError("forbidden", `This API key is read-only: it cannot ${action}`);
  }
  return new ApiError("forbidden", `Your role (${membership.role}) does not allow you to ${action} in hub "${membership.hub.name}"`);
}

/**
 * The caller's membership of one hub, required to grant `permission` there:
 * not a member (or outside the key's hubs) → not_found (never reveal the hub),
 * member without the role (or a read-only key) → forbidden.
 */
export async function hubPermissionOrThrow(ctx: Caller, hubId: string, permission: Permission, action: string): Promise<Membership> {
  const membership = await membershipOrThrow(ctx, hubId);
  if (!allows(membership, permission)) throw forbiddenFor(membership, action, permission);
  return membership;
}

/** The key that orders writes into a hub against membership changes there (see lockMembershipOrThrow). */
/** The advisory-lock key of a hub's membership (shared by writers, exclusive for removals). */
export const hubMembersLockKey = (hubId: string) => `hub-members:${hubId}`;

/**
 * Inside a writing transaction: the caller's membership of the hub read again under the hub's
 * membership lock, held shared until commit (issue 16). A removal, demotion or hub deletion takes
 * that lock exclusively (lockHubMembers), so it waits for writes already past this point and the
 * writes after it see it: once it returns, no write it did not see can still land.
 */
export async function lockMembershipOrThrow(
  tx: DbClient,
  ctx: Caller,
  hub: HubRecord,
  permission: Permission,
  action: string,
  options: { locked?: boolean } = {},
): Promise<Membership> {
  // `locked`: the caller already took { shared: hubMembersLockKey(hub.id) } with its other locks.
  if (!options.locked) await lockForTransaction(tx, { shared: hubMembersLockKey(hub.id) });
  // The hub's contributor permissions with the role, under the lock: `hub` was read before it, and a
  // contributor's dream decision judged by allow_contributor_dreams as it was then still landed after the
  // owner turned it off (that change takes this lock exclusively, so what is read here stands until commit).
  const row = await tx.hubMember.findUnique({
    where: { hubId_userId: { hubId: hub.id, userId: ctx.user.id } },
    select: { role: true, hub: { select: { allowContributorTopics: true, allowContributorDreams: true, contributorDeletePolicy: true } } },
  });
  return lockedRoleOrThrow(ctx, row ? { ...hub, ...row.hub } : hub, row?.role ?? null, permission, action);
}

/**
 * lockMembershipOrThrow's checks on a role the caller read itself, in a statement after it took the
 * shared membership lock (a push reads it with its other rows: one statement less). `role` null: not a member.
 */
export function lockedRoleOrThrow(ctx: Pick<Caller, "credential">, hub: HubRecord, role: string | null, permission: Permission, action: string): Membership {
  const membership = role !== null ? toMembership(ctx.credential, { role, hub }) : undefined;
  if (!membership) throw new ApiError("not_found", "Hub not found");
  if (!allows(membership, permission)) throw forbiddenFor(membership, action, permission);
  return membership;
}

/** The exclusive side: taken by every transaction that removes, demotes or deletes members of a hub. */
export async function lockHubMembers(tx: DbClient, hubId: string): Promise<void> {
  await lockForTransaction(tx, hubMembersLockKey(hubId));
}

/**
 * The hub a request acts on (withAuth's `permission` routes): the X-Hub-ID hub, else the
 * caller's personal hub — or, for a key limited to other hubs, the first hub it was issued for.
 */
export async function targetHubOrThrow(ctx: RequestCaller, hubHeader: string | undefined, permission: Permission): Promise<Membership> {
  let membership: Membership;
  if (hubHeader) {
    membership = await requestMembershipOrThrow(ctx, hubHeader);
  } else {
    const [personal] = await membershipRows(ctx.sql, "m.user_id = $1::uuid AND h.hub_type = 'personal' AND h.owner_id = $1::uuid", [ctx.user.id]);
    const reached = personal ? toMembership(ctx.credential, personal) : undefined;
    if (reached) membership = reached;
    else if (ctx.credential.hubIds?.length) membership = await firstAllowedHub(ctx, ctx.credential.hubIds);
    else throw new ApiError("not_found", "Hub not found");
  }
  if (!allows(membership, permission)) throw forbiddenFor(membership, "do this", permission);
  return membership;
}

async function firstAllowedHub(ctx: RequestCaller, hubIds: readonly string[]): Promise<Membership> {
  for (const hubId of hubIds) {
    const found = await requestMembershipOrThrow(ctx, hubId).catch(() => undefined);
    if (found) return found;
  }
  throw new ApiError("not_found", "Hub not found: this API key reaches no hub you belong to; send X-Hub-ID");
}

/** Recall's scope: the requested hubs (or all) narrowed to the key's allowlist; undefined = every hub the caller belongs to. */
export function scopedHubIds(credential: Credential, requested: string[] | undefined): string[] | undefined {
  if (credential.hubIds === null) return requested;
  const allowed = credential.hubIds;
  return requested ? requested.map(normalizeId).filter((id) => allowed.includes(id)) : [...allowed];
}

/** Personal hubs have exactly one member and cannot be shared, left, transferred or deleted. */
export function assertTeamHub(hub: HubRecord, action: string): void {
  if (hub.hubType === "personal") throw new ApiError("personal_hub", `A personal hub cannot be ${action}`);
}

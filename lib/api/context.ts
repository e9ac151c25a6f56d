import type { Db, SqlRunner } from "@/lib/db/database.ts";
import type { Role } from "./permissions.ts";

export interface RequestContext {
  db: Db;
  /** The driver itself, for lib/recall's read-only SQL (no ORM round trip on the hot path). */
  sql: SqlRunner;
  dbKind: "pglite" | "postgres";
  requestId: string;
  now: () => Date;
  /** The caller's IANA time zone (X-Timezone), for calendar phrases and ages; UTC when absent. */
  timeZone?: string;
}

export interface AuthUser {
  id: string;
  email: string;
  name: string;
}

export const KEY_SCOPES = ["read", "write"] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** How the caller authenticated, and what that credential itself allows (lib/hubs/hub-access.ts enforces it). */
export interface Credential {
  type: "api_key" | "access_token" | "session";
  id?: string;
  /** Sessions and access tokens: read and write. An API key: what it was issued with. */
  scopes: readonly KeyScope[];
  /** null: every hub the user belongs to; otherwise only these (an API key's allowlist). */
  hubIds: readonly string[] | null;
  /** An API key issued for an agent: the source_agent of its pushes. */
  agentName?: string;
  /** OAuth access tokens: the client and the resource (RFC 8707) they were issued for. */
  oauth?: { clientId: string; resource: string };
  /**
   * Dashboard sessions: what identifies the sign-in (its sid and jti) and when it checked its
   * password or provider (ms), so a write that must not outlive the session can check it again.
   */
  session?: { ids: readonly string[]; signedInAt: number };
}

/** A credential that may do anything its user may (sessions, access tokens). */
export const FULL_ACCESS = { scopes: KEY_SCOPES, hubIds: null } as const;

export interface AuthContext extends RequestContext {
  user: AuthUser;
  credential: Credential;
  /** The X-Hub-ID header (parsed only by withAuth): the hub a request targets or prefers. */
  hubHeader?: string;
}

export interface HubRecord {
  id: string;
  name: string;
  slug: string;
  hubType: string;
  ownerId: string;
  allowContributorTopics: boolean;
  allowContributorDreams: boolean;
  contributorDeletePolicy: string;
  createdAt: Date;
  updatedAt: Date;
  icon: string | null;
  accent: string | null;
  headerAuroraMode: string | null;
  settings: unknown;
}

/** The context of a request that acts on one hub (X-Hub-ID, or the personal hub). */
export interface HubContext extends AuthContext {
  hub: HubRecord;
  role: Role;
}

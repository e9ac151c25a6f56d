import type { Db, SqlRunner } from "@/lib/db/database.ts";
import type { Role } from "./permissions.ts";

export interface RequestContext {
  db: Db;
  /** The driver itself, for lib/recall's read-only SQL (no ORM round trip on the hot path). */
  sql: SqlRunner;
  dbKind: "pglite" | "postgres";
  requestId: string;
  now: () => Date;
}

export interface AuthUser {
  id: string;
  email: string;
  name: string;
}

export interface Credential {
  type: "api_key" | "access_token" | "session";
  id?: string;
  /**
   * What this credential may reach beyond the user's own roles (absent = everything the user can):
   * an OAuth grant's consented hubs and read/write. Key scopes and hub restrictions belong here too.
   */
  access?: CredentialAccess;
  /** OAuth access tokens: the client and resource (RFC 8707) they were issued for. */
  oauth?: { clientId: string; resource: string };
}

export interface CredentialAccess {
  /** null = every hub the user can read. */
  hubIds: readonly string[] | null;
  write: boolean;
}

export interface AuthContext extends RequestContext {
  user: AuthUser;
  credential: Credential;
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
}

/** The context of a request that acts on one hub (X-Hub-ID, or the personal hub). */
export interface HubContext extends AuthContext {
  hub: HubRecord;
  role: Role;
}

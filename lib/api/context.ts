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
  /** OAuth access tokens: what the user consented to (their grant). Absent = no restriction. */
  grant?: CredentialGrant;
}

export interface CredentialGrant {
  /** null = every hub the user can read. */
  hubIds: readonly string[] | null;
  write: boolean;
  resource: string;
  clientId: string;
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

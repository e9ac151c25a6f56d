import { BlobMissing, blobStore, readAll, type BlobStore } from "@/lib/blobs/blob-store.ts";
import type { DbClient } from "@/lib/db/database.ts";

/**
 * Where agent session files live: the upload store of lib/blobs (local disk,
 * S3-compatible or Vercel Blob), written server-side. Keys are
 * `agent-sessions/<owner>/<session row id>/<sha256>`: a new version is a new
 * object, written before the row points at it and the previous one deleted
 * after, so a failed write never leaves a row pointing at missing bytes.
 *
 * Sessions stored before that lived in the database (agent_session_blobs)
 * under the three-part key `agent-sessions/<owner>/<id>`; those rows stay
 * readable and are removed when the session is next written.
 */
export interface SessionStore {
  put(key: string, content: string): Promise<void>;
  get(key: string): Promise<string | null>;
  delete(key: string): Promise<void>;
}

export const SESSION_CONTENT_TYPE = "text/plain; charset=utf-8";

/** The key of one version of a session's file in the upload store. */
export function sessionStoreKey(ownerId: string, sessionRowId: string, sha256: string): string {
  return `agent-sessions/${ownerId}/${sessionRowId}/${sha256}`;
}

/** Keys written before session files moved to the upload store. */
export function isDatabaseSessionKey(key: string): boolean {
  return key.split("/").length === 3;
}

export function databaseSessionStore(db: DbClient): SessionStore {
  return {
    async put(key, content) {
      await db.agentSessionBlob.upsert({ where: { key }, create: { key, content }, update: { content } });
    },
    async get(key) {
      return (await db.agentSessionBlob.findUnique({ where: { key } }))?.content ?? null;
    },
    async delete(key) {
      await db.agentSessionBlob.deleteMany({ where: { key } });
    },
  };
}

export function blobSessionStore(store: BlobStore): SessionStore {
  return {
    async put(key, content) {
      await store.write(key, Buffer.from(content, "utf8"), SESSION_CONTENT_TYPE);
    },
    async get(key) {
      // No head first: the object can go between a check and the read (a new version's PUT deletes it).
      try {
        return (await readAll(store, key)).toString("utf8");
      } catch (error) {
        if (error instanceof BlobMissing) return null;
        throw error;
      }
    },
    async delete(key) {
      await store.delete(key);
    },
  };
}

/** The store a key lives in: the database for keys written before the move, else the upload store. */
export async function sessionStoreFor(db: DbClient, key: string): Promise<SessionStore> {
  return isDatabaseSessionKey(key) ? databaseSessionStore(db) : blobSessionStore(await blobStore());
}

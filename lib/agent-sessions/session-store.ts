import type { DbClient } from "@/lib/db/database.ts";

/**
 * Where agent session files live. The blob stores of lib/blobs (local disk,
 * S3, Vercel Blob) take bytes only from clients through signed URLs, so the
 * one implementation keeps session files in the database (agent_session_blobs);
 * a blob-backed store needs a server-side write on the BlobStore interface and
 * implements these same three calls.
 */
export interface SessionStore {
  put(key: string, content: string): Promise<void>;
  get(key: string): Promise<string | null>;
  delete(key: string): Promise<void>;
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

import type { DbClient } from "@/lib/db/database.ts";

/**
 * Where agent session files live. Engram has no upload store yet, so the only
 * implementation keeps the bytes in the database (agent_session_blobs); an
 * object-store adapter (local disk, S3, Vercel Blob) implements the same three
 * calls when one exists.
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

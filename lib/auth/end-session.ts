import { decode } from "next-auth/jwt";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { Db } from "@/lib/db/database.ts";
import { deleteInBatches } from "@/lib/system/delete-in-batches.ts";
import { apiKeysLockKey } from "./create-api-key.ts";
import { SESSION_MAX_AGE_SECONDS, sessionSecret, sessionTokenFrom } from "./session.ts";

/**
 * Expired ids one sign-out deletes at most: a backlog (a server whose sign-outs were rare, then
 * many) went in one unbounded DELETE that held its locks and made that sign-out wait on it. Each
 * sign-out adds one id, so a batch of 500 keeps well ahead.
 */
const PRUNE_BATCH = 500;

/**
 * Ends the dashboard session in this Cookie header for good: a session is a stateless cookie, so
 * signing out only dropped the browser's copy, and a copy taken before (a shared machine, a logging
 * proxy) stayed valid for its 30 days. Its id is kept until the cookie would have expired anyway
 * (sessionUserId refuses it); expired ids are pruned on the way.
 */
export async function endSession(db: Db, cookieHeader: string | null, now = new Date()): Promise<boolean> {
  const token = sessionTokenFrom(cookieHeader);
  if (!token) return false;
  let payload: Awaited<ReturnType<typeof decode>>;
  try {
    payload = await decode({ token, secret: await sessionSecret(db) });
  } catch {
    return false;
  }
  if (typeof payload?.jti !== "string" || typeof payload.exp !== "number") return false;
  // A sign-in's id (sid) ends every cookie re-issued from it, each of which expires at the latest
  // a session's lifetime from now; a cookie without one (issued before sids) ends alone, at its expiry.
  const sid = typeof payload.sid === "string" ? payload.sid : undefined;
  const id = sid ?? payload.jti;
  const expiresAt = sid ? new Date(now.getTime() + SESSION_MAX_AGE_SECONDS * 1000) : new Date(payload.exp * 1000);
  await db.$transaction(async (tx) => {
    // The lock a key or grant this session is making holds while it re-reads the session: one that read it
    // live is committed before this sign-out answers, one that waits here reads it ended (a 401).
    if (typeof payload.sub === "string") await lockForTransaction(tx, apiKeysLockKey(payload.sub));
    await tx.endedSession.upsert({ where: { jti: id }, create: { jti: id, expiresAt }, update: {} });
  });
  await deleteInBatches(
    async (take) => (await db.endedSession.findMany({ where: { expiresAt: { lt: now } }, select: { jti: true }, take })).map((row) => ({ id: row.jti })),
    (ids) => db.endedSession.deleteMany({ where: { jti: { in: ids }, expiresAt: { lt: now } } }),
    PRUNE_BATCH,
    1,
    // The session is ended already: a prune failing must not answer the sign-out as failed.
  ).catch((error: unknown) => console.error("[auth] pruning ended sessions failed", error));
  return true;
}

/** Whether a sign-out response (next-auth's) cleared the session cookie: the sign-out really happened. */
export function clearsSession(res: Response): boolean {
  return res.headers.getSetCookie().some((cookie) => /session-token(\.\d+)?=;/.test(cookie) && /max-age=0\b/i.test(cookie));
}

import { createHash } from "node:crypto";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { MAX_SESSION_BYTES, MAX_SESSION_BYTES_PER_USER, MAX_SESSIONS_PER_USER, type PutAgentSessionBody } from "./agent-session-fields.ts";
import { serializeAgentSession } from "./serialize-agent-session.ts";
import { blobStore } from "@/lib/blobs/blob-store.ts";
import { blobSessionStore, databaseSessionStore, isDatabaseSessionKey, sessionStoreKey } from "./session-store.ts";

/** PUT /v1/agent-sessions: stores (or replaces) one session file of one agent, keyed by session_id. */
export async function putAgentSession(ctx: AuthContext, input: PutAgentSessionBody) {
  const size = Buffer.byteLength(input.content, "utf8");
  if (size > MAX_SESSION_BYTES) {
    throw new ApiError("file_too_large", `A session file is at most ${MAX_SESSION_BYTES / 1024 / 1024} MiB`, { max_bytes: MAX_SESSION_BYTES, size_bytes: size });
  }
  const hash = createHash("sha256").update(input.content, "utf8").digest("hex");
  const now = ctx.now();
  // Checked before the bytes are written too, not only under the lock below: a refused PUT wrote up to
  // 5 MiB for nothing and left the object behind whenever its delete failed.
  await existingWithinLimitsOrThrow(ctx.db, ctx.user.id, input, size);
  // The bytes go to the upload store first, under a key of their own; the row then points at them.
  const store = blobSessionStore(await blobStore());
  const storeKey = sessionStoreKey(ctx.user.id, newId(now.getTime()), hash);
  await store.put(storeKey, input.content);
  let previousKey: string | undefined;
  const result = await ctx.db
    .$transaction(async (tx) => {
      // The user's lock too (always first): the count and bytes below are the user's, not the session's.
      await lockForTransaction(tx, [`agent-sessions:${ctx.user.id}`, sessionLockKey(ctx.user.id, input)]);
      const existing = await existingWithinLimitsOrThrow(tx, ctx.user.id, input, size);
      const id = existing?.id ?? newId(now.getTime());
      previousKey = existing?.storeKey;
      // A file still in the database (stored before the move) goes with the row's switch.
      if (previousKey && isDatabaseSessionKey(previousKey)) await databaseSessionStore(tx).delete(previousKey);
      const data = {
        title: input.title ?? existing?.title ?? "",
        projectPath: input.project_path ?? existing?.projectPath ?? null,
        deviceId: input.device_id ?? existing?.deviceId ?? null,
        contentType: input.content_type ?? existing?.contentType ?? "application/x-ndjson",
        contentHash: hash,
        sizeBytes: size,
        storeKey,
        updatedAt: now,
      };
      const row = existing
        ? await tx.agentSession.update({ where: { id }, data })
        : await tx.agentSession.create({ data: { id, ownerId: ctx.user.id, agent: input.agent, sessionId: input.session_id, createdAt: now, ...data } });
      return { row, created: !existing };
    })
    .catch(async (error: unknown) => {
      // A connection lost on COMMIT fails the call after the database may have committed: the row then
      // points at the new object, and deleting it left a session whose reads served "". Only a re-read
      // showing the row elsewhere proves the switch did not commit; when even that fails, the object stays
      // (a leftover is only bytes). The call may fail while the transaction is still open on the server,
      // its COMMIT on the way: read on another connection at once, the row still showed the old version,
      // the new object was deleted, and the commit then left the row pointing at nothing. The re-read
      // first takes the session's lock, which that transaction holds until it has committed or rolled back.
      const current = await ctx.db
        .$transaction(async (tx) => {
          await lockForTransaction(tx, [sessionLockKey(ctx.user.id, input)]);
          return tx.agentSession.findUnique({ where: sessionWhere(ctx.user.id, input) });
        })
        .catch(() => undefined);
      if (current?.storeKey === storeKey) return { row: current, created: previousKey === undefined };
      if (current !== undefined) await store.delete(storeKey).catch(() => undefined);
      throw error;
    });
  const { row, created } = result;
  // The previous version's object is no longer referenced (best effort: a leftover is only bytes).
  if (previousKey && !isDatabaseSessionKey(previousKey) && previousKey !== storeKey) {
    await store.delete(previousKey).catch((error: unknown) => console.error(`[engram] agent session: deleting ${previousKey} failed`, error));
  }
  return { session: serializeAgentSession(row), created };
}

/** The session this PUT replaces, if any, once the user's count and bytes allow it. */
async function existingWithinLimitsOrThrow(db: DbClient, ownerId: string, input: PutAgentSessionBody, size: number) {
  const existing = await db.agentSession.findUnique({ where: sessionWhere(ownerId, input) });
  const held = await db.agentSession.aggregate({ where: { ownerId }, _count: true, _sum: { sizeBytes: true } });
  if (!existing && held._count >= MAX_SESSIONS_PER_USER) {
    // No endpoint deletes a single session (Memax has none either): replacing one is what a caller can do.
    throw new ApiError(
      "conflict",
      `You keep ${held._count} agent session files; the limit is ${MAX_SESSIONS_PER_USER}. To store this one, replace one you keep: PUT it again with the same agent and session_id`,
      { limit: MAX_SESSIONS_PER_USER },
    );
  }
  const bytes = (held._sum.sizeBytes ?? 0) - (existing?.sizeBytes ?? 0) + size;
  if (bytes > MAX_SESSION_BYTES_PER_USER) {
    throw new ApiError("file_too_large", `Your agent session files would take ${bytes} bytes; the limit is ${MAX_SESSION_BYTES_PER_USER} in all. To store this one, replace a larger one you keep: PUT it again with the same agent and session_id`, {
      max_bytes: MAX_SESSION_BYTES_PER_USER,
      size_bytes: bytes,
    });
  }
  return existing;
}

/** The advisory lock a PUT of this session holds until its transaction ends. */
function sessionLockKey(ownerId: string, input: PutAgentSessionBody) {
  return `agent-session:${ownerId}:${input.agent}:${input.session_id}`;
}

function sessionWhere(ownerId: string, input: PutAgentSessionBody) {
  return { ownerId_agent_sessionId: { ownerId, agent: input.agent, sessionId: input.session_id } };
}

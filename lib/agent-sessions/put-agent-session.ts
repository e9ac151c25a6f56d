import { createHash } from "node:crypto";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { newId } from "@/lib/ids.ts";
import { MAX_SESSION_BYTES, type PutAgentSessionBody } from "./agent-session-fields.ts";
import { serializeAgentSession } from "./serialize-agent-session.ts";
import { databaseSessionStore } from "./session-store.ts";

/** PUT /v1/agent-sessions: stores (or replaces) one session file of one agent, keyed by session_id. */
export async function putAgentSession(ctx: AuthContext, input: PutAgentSessionBody) {
  const size = Buffer.byteLength(input.content, "utf8");
  if (size > MAX_SESSION_BYTES) {
    throw new ApiError("file_too_large", `A session file is at most ${MAX_SESSION_BYTES / 1024 / 1024} MiB`, { max_bytes: MAX_SESSION_BYTES, size_bytes: size });
  }
  const hash = createHash("sha256").update(input.content, "utf8").digest("hex");
  const now = ctx.now();
  const { row, created } = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `agent-session:${ctx.user.id}:${input.agent}:${input.session_id}`);
    const existing = await tx.agentSession.findUnique({ where: { ownerId_agent_sessionId: { ownerId: ctx.user.id, agent: input.agent, sessionId: input.session_id } } });
    const id = existing?.id ?? newId(now.getTime());
    const store = databaseSessionStore(tx);
    const storeKey = `agent-sessions/${ctx.user.id}/${id}`;
    await store.put(storeKey, input.content);
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
  });
  return { session: serializeAgentSession(row), created };
}

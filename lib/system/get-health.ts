import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { VERSION } from "@/lib/config.ts";
import { embeddingsInfo } from "@/lib/ai/embedder.ts";

/** Liveness plus a real round-trip to the database. */
export async function getHealth(ctx: RequestContext) {
  try {
    await ctx.db.$queryRaw`SELECT 1`;
  } catch (error) {
    console.error(`[${ctx.requestId}] health check: database query failed`, error);
    throw new ApiError("unavailable", "Database is not responding");
  }
  return { status: "ok", version: VERSION, database: ctx.dbKind, embeddings: embeddingsInfo() };
}

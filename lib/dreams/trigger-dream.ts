import type { HubContext } from "@/lib/api/context.ts";
import type { Db } from "@/lib/db/database.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { newId } from "@/lib/ids.ts";
import { kickDreamRun } from "./dream-runner.ts";

/**
 * Queues a run for a hub, unless one is already queued or running there: the
 * partial unique index makes two concurrent triggers produce one run, and the
 * second caller gets that run's id.
 */
export async function queueDreamRun(db: Db, hubId: string, triggeredBy: string | null, now: Date): Promise<{ status: "queued" | "already_running"; run_id: string }> {
  const active = await db.dreamRun.findFirst({ where: { hubId, status: { in: ["queued", "running"] } }, select: { id: true } });
  if (active) return { status: "already_running", run_id: active.id };
  const id = newId(now.getTime());
  try {
    await db.dreamRun.create({ data: { id, hubId, triggeredBy, status: "queued", createdAt: now } });
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    const winner = await db.dreamRun.findFirst({ where: { hubId, status: { in: ["queued", "running"] } }, select: { id: true } });
    if (winner) return { status: "already_running", run_id: winner.id };
    throw error;
  }
  await kickDreamRun(hubId, id);
  return { status: "queued", run_id: id };
}

/** POST /v1/dreams/trigger (permission dreams.trigger, checked by the route's wrapper). */
export function triggerDream(ctx: HubContext) {
  return queueDreamRun(ctx.db, ctx.hub.id, ctx.user.id, ctx.now());
}

import type { HubContext } from "@/lib/api/context.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { newId } from "@/lib/ids.ts";
import { kickDreamRun } from "./dream-runner.ts";

type Queued = { status: "queued" | "already_running"; run_id: string };

/**
 * Queues a run for a hub, unless one is already queued or running there: the
 * partial unique index makes two concurrent triggers produce one run, and the
 * second caller gets that run's id. `guard` runs first in the queuing transaction
 * (a member's trigger: their role, read again as the run is queued).
 */
export async function queueDreamRun(db: Db, hubId: string, triggeredBy: string | null, now: Date, guard?: (tx: DbClient) => Promise<unknown>, options: { kick?: boolean } = {}): Promise<Queued> {
  const id = newId(now.getTime());
  let result: Queued;
  try {
    result = await db.$transaction(async (tx): Promise<Queued> => {
      await guard?.(tx);
      const active = await tx.dreamRun.findFirst({ where: { hubId, status: { in: ["queued", "running"] } }, select: { id: true } });
      if (active) {
        await adoptScheduledRun(tx, active.id, triggeredBy);
        return { status: "already_running", run_id: active.id };
      }
      await tx.dreamRun.create({ data: { id, hubId, triggeredBy, status: "queued", createdAt: now } });
      return { status: "queued", run_id: id };
    });
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    const winner = await db.dreamRun.findFirst({ where: { hubId, status: { in: ["queued", "running"] } }, select: { id: true } });
    if (winner) {
      // Under the same guard as the queuing: a member demoted or removed since adopts nothing.
      await db.$transaction(async (tx) => {
        await guard?.(tx);
        await adoptScheduledRun(tx, winner.id, triggeredBy);
      });
      return { status: "already_running", run_id: winner.id };
    }
    throw error;
  }
  // `kick: false`: the Inngest schedule sends every waiting run's event itself, in one batch.
  if (result.status === "queued" && options.kick !== false) await kickDreamRun(hubId, id);
  return result;
}

/**
 * A member's trigger answered with a scheduled run makes it theirs: a scheduled run of a hub whose
 * dreams are off takes no step (withDreamSettings), so the member who asked got the id of a run that did
 * nothing. Only while it waits to start: a running one has already skipped (and recorded) its first phases
 * as switched off, and handing it over would give the member a run without them.
 */
async function adoptScheduledRun(db: DbClient, runId: string, triggeredBy: string | null): Promise<void> {
  if (triggeredBy === null) return;
  await db.dreamRun.updateMany({ where: { id: runId, triggeredBy: null, status: "queued" }, data: { triggeredBy } });
}

/**
 * POST /v1/dreams/trigger (permission dreams.trigger, checked by the route's wrapper, and again under
 * the hub's membership lock as the run is queued: a member demoted or removed since queues nothing).
 */
export function triggerDream(ctx: HubContext) {
  return queueDreamRun(ctx.db, ctx.hub.id, ctx.user.id, ctx.now(), (tx) => lockMembershipOrThrow(tx, ctx, ctx.hub, "dreams.trigger", "trigger dreams"));
}

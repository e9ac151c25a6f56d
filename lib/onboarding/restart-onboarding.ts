import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { createNotification } from "@/lib/notifications/create-notification.ts";
import type { NotificationObject } from "@/lib/notifications/notification-object.ts";
import { serializeNotification } from "@/lib/notifications/serialize-notification.ts";
import { CHECKLIST_KIND, ONBOARDING_SOURCE, onboardingPayload } from "./onboarding-items.ts";
import { onboardingVersion } from "./onboarding-state.ts";
import { refreshOnboarding } from "./refresh-onboarding.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";

/** Restarts per user per 24 hours (Memax's limit). */
export const MAX_RESTARTS_PER_DAY = 3;
const DAY_MS = 86_400_000;

/**
 * POST /v1/onboarding/restart: dismisses the caller's pending getting-started checklist (if any)
 * and starts the next version, its items already ticked for what the account has done. The first
 * call starts version 1. At most MAX_RESTARTS_PER_DAY per 24 hours (429 rate_limited).
 */
export async function restartOnboarding(ctx: AuthContext): Promise<NotificationObject> {
  const id = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, `onboarding:${ctx.user.id}`);
    // Read under the lock: restarts then stamp their checklists in the order they take it (a time read
    // before the lock let a restart that waited stamp its checklist before the one that went first).
    const now = ctx.now();
    const where = { userId: ctx.user.id, kind: CHECKLIST_KIND, sourceKind: ONBOARDING_SOURCE };
    const inDay = { ...where, createdAt: { gt: new Date(now.getTime() - DAY_MS) } };
    const recent = await tx.notification.count({ where: inDay });
    if (recent >= MAX_RESTARTS_PER_DAY) {
      // Room comes back when the restart that makes the count one too many leaves the 24 hours: a fixed
      // hour sent clients that honour Retry-After back into the same refusal up to 23 times.
      const freeing = await tx.notification.findFirst({ where: inDay, orderBy: { createdAt: "asc" }, skip: recent - MAX_RESTARTS_PER_DAY, select: { createdAt: true } });
      const retryAfter = retryAfterSeconds((freeing?.createdAt.getTime() ?? now.getTime()) + DAY_MS - now.getTime());
      throw new ApiError(
        "rate_limited",
        `The checklist can be restarted ${MAX_RESTARTS_PER_DAY} times a day; try again in ${retryAfter}s`,
        { limit: MAX_RESTARTS_PER_DAY, retry_after: retryAfter },
        { "Retry-After": String(retryAfter) },
      );
    }
    // The highest version so far, not the newest row's: a clock that stepped back cannot repeat one.
    const versions = await tx.notification.findMany({ where, select: { sourceId: true } });
    const version = Math.max(0, ...versions.map((row) => onboardingVersion(row.sourceId))) + 1;
    // Under each pending checklist's own lock, as its item ticks and self-resolution take it: a tick that
    // had read it pending wrote it back whole (as applied_auto) over this dismissal, after it was answered.
    const pending = await tx.notification.findMany({ where: { ...where, status: "pending" }, select: { id: true }, orderBy: { id: "asc" } });
    await lockForTransaction(tx, pending.map((row) => `notification:${row.id}`));
    await tx.notification.updateMany({ where: { ...where, status: "pending" }, data: { status: "resolved", resolution: "dismissed", resolvedAt: now } });
    const created = await createNotification(tx, {
      userId: ctx.user.id,
      kind: CHECKLIST_KIND,
      sourceKind: ONBOARDING_SOURCE,
      sourceId: `v${version}`,
      payload: onboardingPayload(version) as unknown as Record<string, unknown>,
      actorId: ctx.user.id,
      now,
    });
    return created.id;
  });
  // The restart has committed: a refresh failing now (a failover, a timeout) leaves the new checklist's
  // ticks for the next read, which refreshes again. Thrown, it answered 500 for a restart that was done,
  // and a client retrying it used up another of the day's restarts.
  await refreshOnboarding(ctx).catch((error: unknown) => console.error(`[engram] onboarding: the checklist ${id} restarted, but ticking its items failed; the next read does`, error));
  return serializeNotification(await ctx.db.notification.findUniqueOrThrow({ where: { id } }), ctx.now());
}

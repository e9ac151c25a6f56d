import type { AuthContext } from "@/lib/api/context.ts";

export type UsageCounterName = "pushes" | "recalls" | "asks";

/** First instant of the calendar month (UTC) containing `at`: the usage period. */
export function periodStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

export function periodEnd(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

/** Counts one call against the caller's current period (one upsert; a failure never fails the call). */
export async function countUsage(ctx: AuthContext, counter: UsageCounterName): Promise<void> {
  const start = periodStart(ctx.now());
  try {
    await ctx.db.usageCounter.upsert({
      where: { userId_periodStart: { userId: ctx.user.id, periodStart: start } },
      create: { userId: ctx.user.id, periodStart: start, [counter]: 1 },
      update: { [counter]: { increment: 1 } },
    });
  } catch (error) {
    console.error(`[${ctx.requestId}] usage: could not count ${counter}`, error);
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { checklistComplete, completeItems } from "@/lib/notifications/checklist.ts";
import { flushUsage } from "@/lib/usage/count-usage.ts";
import { CHECKLIST_KIND, ONBOARDING_ITEMS, ONBOARDING_SOURCE, type ChecklistPayload, type Trigger } from "./onboarding-items.ts";

interface Signals {
  /** Memories the user owns, counted up to the largest target. */
  memories: number;
  recalls: number;
  agent: boolean;
  invite: boolean;
}

const MEMORY_TARGET = Math.max(...ONBOARDING_ITEMS.flatMap((i) => (i.trigger.kind === "memories" ? [i.trigger.atLeast] : [])));

async function signals(db: DbClient, userId: string): Promise<Signals> {
  const [memories, recalls, key, grant, config, invite] = await Promise.all([
    db.memory.findMany({ where: { ownerId: userId }, select: { id: true }, take: MEMORY_TARGET }),
    db.usageCounter.findFirst({ where: { userId, recalls: { gt: 0 } }, select: { recalls: true } }),
    db.apiKey.findFirst({ where: { userId, agentName: { not: null } }, select: { id: true } }),
    // Only an exchanged consent connected an app: exchanging a code writes the grant's first refresh
    // token, and a live grant always keeps one (lib/oauth/prune-expired-tokens.ts).
    db.oAuthGrant.findFirst({ where: { userId, refreshTokens: { some: {} } }, select: { id: true } }),
    db.agentConfig.findFirst({ where: { ownerId: userId }, select: { id: true } }),
    db.invite.findFirst({ where: { createdBy: userId }, select: { id: true } }),
  ]);
  return { memories: memories.length, recalls: recalls?.recalls ?? 0, agent: Boolean(key || grant || config), invite: Boolean(invite) };
}

function met(trigger: Trigger, s: Signals): boolean {
  switch (trigger.kind) {
    case "memories":
      return s.memories >= trigger.atLeast;
    case "recalls":
      return s.recalls >= trigger.atLeast;
    case "agent":
      return s.agent;
    case "invite":
      return s.invite;
  }
}

/**
 * Brings the caller's pending onboarding checklist up to date with their account: items whose
 * trigger now holds are done, progress bars move, and a checklist whose required items are all
 * done resolves itself (applied_auto). Read paths call it (the notification list and summary, the
 * onboarding state), so nothing on the write paths pays for it; it costs one indexed lookup when
 * there is no pending checklist.
 */
export async function refreshOnboarding(ctx: AuthContext): Promise<void> {
  const pending = await ctx.db.notification.findMany({
    where: { userId: ctx.user.id, kind: CHECKLIST_KIND, sourceKind: ONBOARDING_SOURCE, status: "pending" },
    select: { id: true },
  });
  if (pending.length === 0) return;
  // This process's recall counts are batched in memory; write them so the recall step sees them.
  await flushUsage();
  const now = ctx.now();
  for (const { id } of pending) {
    await ctx.db.$transaction(async (tx) => {
      await lockForTransaction(tx, `notification:${id}`);
      const row = await tx.notification.findFirst({ where: { id, status: "pending" } });
      if (!row) return;
      // Read under the lock: read before it, a refresh that waited behind one which had counted a newer
      // push wrote its older count back (a progress bar going from 3 of 5 back to 2).
      const s = await signals(tx, ctx.user.id);
      const payload = row.payload as unknown as ChecklistPayload;
      let changed = completeItems(payload, ONBOARDING_ITEMS.filter((spec) => met(spec.trigger, s)).map((spec) => spec.id), now);
      for (const item of payload.items) {
        if (!item.progress || item.completed_at) continue;
        const current = Math.min(s.memories, item.progress.target);
        if (current !== item.progress.current) {
          item.progress = { ...item.progress, current };
          changed = true;
        }
      }
      if (!changed) return;
      const done = checklistComplete(payload);
      await tx.notification.update({
        where: { id },
        data: { payload: payload as object, ...(done && { status: "resolved", resolution: "applied_auto", resolvedAt: now }) },
      });
    });
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import type { ReadOptions } from "@/lib/notifications/list-notifications.ts";
import { effectiveStatus } from "@/lib/notifications/serialize-notification.ts";
import { CHECKLIST_KIND, ONBOARDING_SOURCE } from "./onboarding-items.ts";
import { refreshOnboarding } from "./refresh-onboarding.ts";

/** Memax's OnboardingState. */
export interface OnboardingState {
  has_prior: boolean;
  current_version: number;
  current_status?: string;
}

/** The version a checklist row is (its source_id, "v3"). */
export function onboardingVersion(sourceId: string | null): number {
  const version = Number(sourceId?.replace(/^v/, ""));
  return Number.isInteger(version) && version > 0 ? version : 0;
}

/** GET /v1/onboarding/state: whether the caller ever had a getting-started checklist, its latest version and status. */
export async function onboardingState(ctx: AuthContext, { refresh = true }: ReadOptions = {}): Promise<OnboardingState> {
  if (refresh) await refreshOnboarding(ctx);
  // The highest version, as restarts number them (restart-onboarding.ts), not the newest row: servers
  // whose clocks disagree can stamp a later checklist with an earlier time.
  const rows = await ctx.db.notification.findMany({ where: { userId: ctx.user.id, kind: CHECKLIST_KIND, sourceKind: ONBOARDING_SOURCE } });
  const latest = rows.reduce<(typeof rows)[number] | undefined>((best, row) => (!best || onboardingVersion(row.sourceId) > onboardingVersion(best.sourceId) ? row : best), undefined);
  if (!latest) return { has_prior: false, current_version: 0 };
  return { has_prior: true, current_version: onboardingVersion(latest.sourceId), current_status: effectiveStatus(latest, ctx.now()) };
}

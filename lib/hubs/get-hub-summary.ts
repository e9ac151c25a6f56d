import type { AuthContext } from "@/lib/api/context.ts";
import { membershipOrThrow } from "./hub-access.ts";
import { hubCounts } from "./hub-counts.ts";

/** The light view: counts and the caller's role only. */
export async function getHubSummary(ctx: AuthContext, hubId: string) {
  const { hub, role } = await membershipOrThrow(ctx, hubId);
  return { hub_id: hub.id, name: hub.name, role, counts: await hubCounts(ctx.db, hub.id, ctx.now()) };
}

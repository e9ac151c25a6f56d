import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";

/** The hub a topic call targets: hub_id, else the X-Hub-ID header, else the caller's personal hub. */
export async function topicHubId(ctx: AuthContext, explicit: string | undefined, header: string | null): Promise<string> {
  const chosen = explicit ?? (header?.trim() || undefined);
  if (chosen) return chosen;
  const hub = await ctx.db.hub.findFirst({ where: { ownerId: ctx.user.id, hubType: "personal" }, select: { id: true } });
  if (!hub) throw new ApiError("not_found", "Hub not found");
  return hub.id;
}

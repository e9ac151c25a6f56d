import type { AuthContext } from "@/lib/api/context.ts";
import { targetHubOrThrow } from "@/lib/hubs/hub-access.ts";

/**
 * The hub a topic call targets: hub_id when given, else the request's hub
 * (X-Hub-ID, else the personal hub, else the first hub a restricted key reaches).
 */
export async function topicHubId(ctx: AuthContext, explicit: string | undefined): Promise<string> {
  if (explicit) return explicit;
  return (await targetHubOrThrow(ctx, ctx.hubHeader, "memories.read")).hub.id;
}

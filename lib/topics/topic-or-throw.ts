import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { hubPermissionOrThrow, membershipOrThrow, type Membership } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import type { TopicRow } from "./serialize-topic.ts";

/** A topic in one of the caller's hubs; outside them it is not_found. */
export async function readableTopicOrThrow(ctx: AuthContext, id: string): Promise<{ topic: TopicRow; membership: Membership }> {
  const topic = isUuid(id) ? await ctx.db.topic.findFirst({ where: { id, hub: { members: { some: { userId: ctx.user.id } } } } }) : null;
  if (!topic) throw new ApiError("not_found", "Topic not found");
  return { topic, membership: await membershipOrThrow(ctx, topic.hubId) };
}

/**
 * A topic the caller may manage: outside the caller's hubs it is not_found,
 * in a hub where their role cannot manage topics it is forbidden.
 */
export async function topicOrThrow(ctx: AuthContext, id: string, action: string): Promise<{ topic: TopicRow; membership: Membership }> {
  const { topic } = await readableTopicOrThrow(ctx, id);
  const membership = await hubPermissionOrThrow(ctx, topic.hubId, "topics.manage", action);
  return { topic, membership };
}

export function assertNotArchived(topic: TopicRow): void {
  if (topic.archivedAt) throw new ApiError("topic_archived", "This topic is archived; restore it first", { topic_id: topic.id });
}

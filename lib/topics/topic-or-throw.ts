import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { Prisma } from "@/lib/db/generated/client.ts";
import { hubMembersLockKey, hubPermissionOrThrow, membershipOrThrow, type Membership } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { topicsLockKey } from "./hub-topics.ts";
import type { TopicRow } from "./serialize-topic.ts";

/**
 * Prisma filter: topics of hubs the caller belongs to and the credential reaches. Without the second
 * condition a key limited to some hubs found topics of the owner's other hubs and was told "Hub not
 * found" for them, "Topic not found" for ids that exist nowhere.
 */
export function readableTopicWhere(ctx: Pick<AuthContext, "user" | "credential">, options: { withDeleting?: boolean } = {}): Prisma.TopicWhereInput {
  return {
    hub: { members: { some: { userId: ctx.user.id } } },
    ...(ctx.credential.hubIds !== null && { hubId: { in: [...ctx.credential.hubIds] } }),
    // A topic being deleted is gone to everyone but a delete, which finishes one that was cut short.
    ...(!options.withDeleting && { deletingAt: null }),
  };
}

/** A topic in one of the caller's hubs; outside them it is not_found. */
export async function readableTopicOrThrow(ctx: AuthContext, id: string, options: { withDeleting?: boolean } = {}): Promise<{ topic: TopicRow; membership: Membership }> {
  const topic = isUuid(id) ? await ctx.db.topic.findFirst({ where: { id, ...readableTopicWhere(ctx, options) } }) : null;
  if (!topic) throw new ApiError("not_found", "Topic not found");
  return { topic, membership: await membershipOrThrow(ctx, topic.hubId) };
}

/**
 * A topic the caller may manage: outside the caller's hubs it is not_found,
 * in a hub where their role cannot manage topics it is forbidden.
 */
export async function topicOrThrow(ctx: AuthContext, id: string, action: string, options: { withDeleting?: boolean } = {}): Promise<{ topic: TopicRow; membership: Membership }> {
  const { topic } = await readableTopicOrThrow(ctx, id, options);
  const membership = await hubPermissionOrThrow(ctx, topic.hubId, "topics.manage", action);
  return { topic, membership };
}

export function assertNotArchived(topic: Pick<TopicRow, "id" | "archivedAt">): void {
  if (topic.archivedAt) throw new ApiError("topic_archived", "This topic is archived; restore it first", { topic_id: topic.id });
}

/**
 * In a transaction that files memories under this topic, before it locks them: keeps the hub's topics
 * from being deleted or archived until it commits (the shared side of the lock those changes take),
 * then reads the topic again. Checked only before the transaction, a topic deleted in between made
 * the memories' foreign key fail: a 500 on PostgreSQL (tests/races.test.ts).
 */
export async function lockTopicForFiling(tx: DbClient, topic: { id: string; hubId: string }): Promise<void> {
  await lockForTransaction(tx, [{ shared: hubMembersLockKey(topic.hubId) }, { shared: topicsLockKey(topic.hubId) }]);
  const current = await tx.topic.findFirst({ where: { id: topic.id, hubId: topic.hubId, deletingAt: null }, select: { id: true, archivedAt: true } });
  if (!current) throw new ApiError("not_found", "Topic not found");
  assertNotArchived(current);
}

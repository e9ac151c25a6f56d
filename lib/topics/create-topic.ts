import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { isUuid, newRandomId } from "@/lib/ids.ts";
import { HubTopics } from "./hub-topics.ts";
import { serializeTopic } from "./serialize-topic.ts";
import { MAX_TOPIC_DEPTH, MAX_TOPICS_PER_HUB, type CreateTopicBody } from "./topic-fields.ts";
import { topicHubId } from "./topic-hub.ts";
import { readableTopicWhere } from "./topic-or-throw.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";

/**
 * A new topic; needs topics.manage in its hub (owner, admin, or contributor
 * when the hub allows it). The hub is hub_id, else the parent's hub, else
 * X-Hub-ID, else the personal hub. The parent must be an active topic of that
 * hub, the new topic at most 5 levels deep, its name free among its siblings.
 */
export async function createTopic(ctx: AuthContext, input: CreateTopicBody) {
  let hubId = input.hub_id;
  if (!hubId && input.parent_id) {
    const parent = isUuid(input.parent_id)
      ? await ctx.db.topic.findFirst({ where: { id: input.parent_id, ...readableTopicWhere(ctx) }, select: { hubId: true } })
      : null;
    if (!parent) throw new ApiError("invalid_parent", "The parent topic does not exist in this hub", { parent_id: input.parent_id });
    hubId = parent.hubId;
  }
  const { hub } = await hubPermissionOrThrow(ctx, await topicHubId(ctx, hubId), "topics.manage", "create topics");
  const now = ctx.now();
  const parentId = input.parent_id ?? null;
  try {
    const topic = await ctx.db.$transaction(async (tx) => {
      const topics = await HubTopics.lockAndLoad(tx, hub.id, { ctx, action: "create topics" });
      if (topics.size >= MAX_TOPICS_PER_HUB) {
        throw new ApiError("conflict", `A hub can have at most ${MAX_TOPICS_PER_HUB} topics; delete or merge some first`, { limit: MAX_TOPICS_PER_HUB });
      }
      if (parentId) {
        topics.parentOrThrow(parentId);
        if (topics.depth(parentId) + 1 >= MAX_TOPIC_DEPTH) {
          throw new ApiError("max_depth", `Topics nest at most ${MAX_TOPIC_DEPTH} levels deep`, { max_depth: MAX_TOPIC_DEPTH });
        }
      }
      topics.assertNameFree(parentId, input.name);
      const created = await tx.topic.create({
        data: {
          id: newRandomId(),
          hubId: hub.id,
          parentId,
          name: input.name,
          description: input.description ?? "",
          icon: input.icon ?? "",
          position: input.position ?? topics.nextPosition(parentId),
          pinned: input.pinned ?? false,
          createdBy: ctx.user.id,
          createdAt: now,
          updatedAt: now,
        },
      });
      // Last, as emitEvent asks (its lock is held to commit), and naming the topic: without an
      // entity_id a client could not tell which topic appeared.
      await emitEvent(tx, { type: "topic.changed", hubId: hub.id, actorId: ctx.user.id, entityId: created.id });
      return created;
    });
    return { ...serializeTopic(topic, 0), total_memory_count: 0, children: [] };
  } catch (error) {
    // The lock makes this unlikely; the unique index is the last word.
    if (isUniqueViolation(error)) throw new ApiError("duplicate_name", `A topic named "${input.name}" already exists here`);
    throw error;
  }
}

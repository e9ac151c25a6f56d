import type { Topic } from "@/lib/db/generated/client.ts";
import type { TopicObject } from "./topic-object.ts";

export type TopicRow = Topic;

/**
 * The topic object: Engram's fields and the Memax SDK's Topic side by side.
 * `archived_at` is present only on archived topics.
 */
export function serializeTopic(topic: TopicRow, memoryCount: number): TopicObject {
  return {
    id: topic.id,
    hub_id: topic.hubId,
    owner_id: topic.createdBy ?? "",
    parent_id: topic.parentId,
    name: topic.name,
    description: topic.description,
    icon: topic.icon,
    position: topic.position,
    pinned: topic.pinned,
    user_modified: topic.userModified,
    memory_count: memoryCount,
    created_by: topic.createdBy,
    created_at: topic.createdAt.toISOString(),
    updated_at: topic.updatedAt.toISOString(),
    ...(topic.archivedAt && { archived_at: topic.archivedAt.toISOString() }),
  };
}

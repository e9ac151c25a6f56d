export interface TopicRow {
  id: string;
  hubId: string;
  name: string;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The topic object of docs/topics.md. */
export function serializeTopic(topic: TopicRow, memoryCount: number) {
  return {
    id: topic.id,
    hub_id: topic.hubId,
    name: topic.name,
    memory_count: memoryCount,
    created_by: topic.createdBy,
    created_at: topic.createdAt.toISOString(),
    updated_at: topic.updatedAt.toISOString(),
  };
}

import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { unassignTopicMemory } from "@/lib/topics/topic-memories.ts";

// DELETE /v1/topics/{id}/memories/{memory_id} — take a memory out of this topic
export const DELETE = withAuth<{ id: string; memory_id: string }>({}, async (ctx, _req, { id, memory_id }) => ok(await unassignTopicMemory(ctx, id, memory_id)));

export const { GET, POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("DELETE");

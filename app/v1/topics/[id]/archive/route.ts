import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { archiveTopic } from "@/lib/topics/archive-topic.ts";

// POST /v1/topics/{id}/archive — archive a topic and its subtopics (restorable; memories keep their topic)
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await archiveTopic(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

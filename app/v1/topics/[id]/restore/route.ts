import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { restoreTopic } from "@/lib/topics/archive-topic.ts";

// POST /v1/topics/{id}/restore — bring back an archived topic and its subtopics
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, { id }) => ok(await restoreTopic(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

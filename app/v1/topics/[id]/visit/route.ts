import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { visitTopic } from "@/lib/topics/visit-topic.ts";

// POST /v1/topics/{id}/visit — record that the caller opened the topic (a read receipt: read-only keys may send it)
export const POST = withAuth<{ id: string }>({ reads: true }, async (ctx, _req, { id }) => ok(await visitTopic(ctx, id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { triggerDream } from "@/lib/dreams/trigger-dream.ts";

// POST /v1/dreams/trigger — queue a dream run for the X-Hub-ID hub (else the personal hub); one at a time per hub
export const POST = withAuth({ bucket: "heavy", permission: "dreams.trigger" }, async (ctx) => ok(await triggerDream(ctx), 202));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

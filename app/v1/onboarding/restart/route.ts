import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { restartOnboarding } from "@/lib/onboarding/restart-onboarding.ts";

// POST /v1/onboarding/restart — start the getting-started checklist (again): the new checklist notification
export const POST = withAuth({}, async (ctx) => ok(await restartOnboarding(ctx), 201));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");

import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { onboardingState } from "@/lib/onboarding/onboarding-state.ts";

// GET /v1/onboarding/state — whether a getting-started checklist was ever started, its version and status (HEAD refreshes no checklist)
export const GET = withAuth({}, async (ctx, req) => ok(await onboardingState(ctx, { refresh: req.method !== "HEAD" })));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

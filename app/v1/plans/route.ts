import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listPlans } from "@/lib/usage/list-plans.ts";

// GET /v1/plans — this install's plans (one for people, one for team hubs) with the limits it enforces
export const GET = withAuth({}, async () => ok(listPlans()));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

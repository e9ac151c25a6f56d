import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { listIdentities } from "@/lib/auth/list-identities.ts";

// GET /v1/auth/identities — the GitHub / Google accounts that sign the caller in
export const GET = withAuth({}, async (ctx) => ok(await listIdentities(ctx)));

export const { POST, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET");

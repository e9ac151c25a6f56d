import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createApiKey, createApiKeyBodySchema } from "@/lib/auth/create-api-key.ts";
import { listApiKeys } from "@/lib/auth/list-api-keys.ts";

// GET /v1/auth/api-keys — the caller's active keys (a plain array, at most 100), without secrets; not for connected apps' tokens
export const GET = withAuth({ credentials: true }, async (ctx) => ok(await listApiKeys(ctx)));

// POST /v1/auth/api-keys — issue a key (optionally limited to hubs and/or reading); the secret is in this response only
export const POST = withAuth({ account: true, credentials: true }, async (ctx, req) => ok(await createApiKey(ctx, await parseJson(req, createApiKeyBodySchema)), 201));

export const { PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("GET", "POST");

import { z } from "zod";
import { ok } from "@/lib/api/envelope.ts";
import { parseJson, parseQuery } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createApiKey, createApiKeyBodySchema } from "@/lib/auth/create-api-key.ts";
import { listApiKeys } from "@/lib/auth/list-api-keys.ts";

const listApiKeysQuerySchema = z.object({ limit: z.string().optional(), cursor: z.string().optional() });

// GET /v1/auth/api-keys — the caller's active keys, without secrets
export const GET = withAuth({}, async (ctx, req) => ok(await listApiKeys(ctx, parseQuery(req, listApiKeysQuerySchema))));

// POST /v1/auth/api-keys — issue a key; the secret is in this response only
export const POST = withAuth({}, async (ctx, req) => ok(await createApiKey(ctx, await parseJson(req, createApiKeyBodySchema)), 201));

export const { PUT, PATCH, DELETE } = methodsNotAllowed("GET", "POST");

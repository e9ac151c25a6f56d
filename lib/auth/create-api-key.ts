import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { hashSecret } from "./hash-secret.ts";
import { serializeApiKey, type ApiKeyObject } from "./serialize-api-key.ts";

export const API_KEY_PREFIX = "egk_";

export const createApiKeyBodySchema = z.strictObject({
  name: z.string().trim().min(1).max(100),
  expires_in_days: z.int().min(1).max(3650).optional(),
});

/** Issues a key: returned once in full, stored only as its SHA-256. */
export async function createApiKey(
  ctx: Pick<AuthContext, "db" | "user" | "now">,
  input: z.output<typeof createApiKeyBodySchema>,
): Promise<ApiKeyObject & { key: string }> {
  const { key, row } = await insertApiKey(ctx.db, ctx.user.id, input.name, ctx.now(), input.expires_in_days);
  return { ...serializeApiKey(row), key };
}

export async function insertApiKey(db: DbClient, userId: string, name: string, now: Date, expiresInDays?: number) {
  const key = `${API_KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const row = await db.apiKey.create({
    data: {
      id: newId(now.getTime()),
      userId,
      name,
      prefix: key.slice(0, API_KEY_PREFIX.length + 6),
      keyHash: hashSecret(key),
      createdAt: now,
      expiresAt: expiresInDays ? new Date(now.getTime() + expiresInDays * 86_400_000) : null,
    },
  });
  return { key, row };
}

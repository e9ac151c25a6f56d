import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { serializeApiKey } from "./serialize-api-key.ts";

const positionSchema = z.tuple([z.string(), z.string()]);

/** The caller's keys that are not revoked, newest first, without secrets. */
export async function listApiKeys(ctx: AuthContext, query: { limit?: string; cursor?: string }) {
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const after = query.cursor ? decodeCursor(secret, "api_keys", ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.apiKey.findMany({
    where: {
      userId: ctx.user.id,
      revokedAt: null,
      ...(after && {
        OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }],
      }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
  });
  const result = page("api_keys", rows, limit, (last) =>
    encodeCursor(secret, "api_keys", ctx.user.id, [last.createdAt.toISOString(), last.id]),
  );
  return { ...result, api_keys: result.api_keys.map(serializeApiKey) };
}

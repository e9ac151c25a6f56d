import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { serializeInvite } from "./serialize-invite.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/** Usable invites (active, not expired), newest first, without their tokens. */
export async function listInvites(ctx: AuthContext, hubId: string, query: { limit?: string; cursor?: string }) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "see invites");
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `invites:${hub.id}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const now = ctx.now();
  const rows = await ctx.db.invite.findMany({
    where: {
      hubId: hub.id,
      state: "active",
      expiresAt: { gt: now },
      ...(after && { OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
  });
  const result = page("invites", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return { ...result, invites: result.invites.map((invite) => serializeInvite(invite, now)) };
}

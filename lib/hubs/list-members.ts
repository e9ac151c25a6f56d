import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { membershipOrThrow } from "./hub-access.ts";
import { memberViewer } from "./member-viewer.ts";
import type { ListQuery } from "./hub-fields.ts";
import { memberUserSelect, serializeMember } from "./serialize-hub.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/** Members of a hub the caller belongs to, in joining order (e-mails masked unless the caller, with this credential, manages the hub). */
export async function listMembers(ctx: AuthContext, hubId: string, query: ListQuery) {
  const membership = await membershipOrThrow(ctx, hubId);
  const { hub } = membership;
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `members:${hub.id}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.hubMember.findMany({
    where: {
      hubId: hub.id,
      ...(after && {
        OR: [{ joinedAt: { gt: new Date(after[0]) } }, { joinedAt: new Date(after[0]), userId: { gt: after[1] } }],
      }),
    },
    orderBy: [{ joinedAt: "asc" }, { userId: "asc" }],
    take: limit + 1,
    include: { user: memberUserSelect },
  });
  const result = page("members", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.joinedAt.toISOString(), last.userId]));
  return { ...result, members: result.members.map((member) => serializeMember(member, memberViewer(ctx.user.id, membership))) };
}

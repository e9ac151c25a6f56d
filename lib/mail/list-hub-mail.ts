import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { decodeCursor, encodeCursor, page, parseLimit } from "@/lib/api/pagination.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import type { ListQuery } from "@/lib/hubs/hub-fields.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";

const positionSchema = z.tuple([z.iso.datetime(), z.uuid()]);

/**
 * GET /v1/hubs/:id/mail: the mail sent about a hub (today: invites by e-mail), newest first, for
 * those who manage its invites. Without SMTP_URL this list is where an admin sees what would have
 * gone out. Bodies are as stored: an invite's token is already redacted there (send-mail.ts).
 */
export async function listHubMail(ctx: AuthContext, hubId: string, query: ListQuery) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "see the hub's mail");
  const limit = parseLimit(query.limit);
  const secret = await serverSecret(ctx.db);
  const list = `mail:${hub.id}`;
  const after = query.cursor ? decodeCursor(secret, list, ctx.user.id, query.cursor, positionSchema) : undefined;
  const rows = await ctx.db.mailOutbox.findMany({
    where: {
      hubId: hub.id,
      ...(after && { OR: [{ createdAt: { lt: new Date(after[0]) } }, { createdAt: new Date(after[0]), id: { lt: after[1] } }] }),
    },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
  });
  const result = page("mail", rows, limit, (last) => encodeCursor(secret, list, ctx.user.id, [last.createdAt.toISOString(), last.id]));
  return {
    ...result,
    mail: result.mail.map((row) => ({
      id: row.id,
      kind: row.kind,
      to: row.toAddress,
      subject: row.subject,
      body: row.body,
      // sent: the SMTP relay took it; failed: it refused (error says why); logged: kept here only (no
      // SMTP_URL; the row does not record the transport, so a send in progress reads the same).
      status: row.sentAt ? "sent" : row.error ? "failed" : "logged",
      error: row.error,
      created_at: row.createdAt.toISOString(),
      sent_at: row.sentAt?.toISOString() ?? null,
    })),
  };
}

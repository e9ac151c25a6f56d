import { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";

export const updateMeBodySchema = z.strictObject({ name: z.string().trim().min(1).max(100) });

/** The calling user, their personal hub and how they authenticated. */
export async function getMe(ctx: AuthContext) {
  const [user, personal] = await Promise.all([
    ctx.db.user.findUniqueOrThrow({ where: { id: ctx.user.id } }),
    ctx.db.hub.findFirst({ where: { ownerId: ctx.user.id, hubType: "personal" }, select: { id: true } }),
  ]);
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    created_at: user.createdAt.toISOString(),
    personal_hub_id: personal?.id ?? null,
    credential: ctx.credential,
  };
}

export async function updateMe(ctx: AuthContext, input: z.output<typeof updateMeBodySchema>) {
  await ctx.db.user.update({ where: { id: ctx.user.id }, data: { name: input.name } });
  return getMe({ ...ctx, user: { ...ctx.user, name: input.name } });
}

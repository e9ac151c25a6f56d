import type { AuthContext } from "@/lib/api/context.ts";
import { slugProblem } from "./hub-fields.ts";

/** Whether a slug could be given to a new hub right now. */
export async function checkSlug(ctx: Pick<AuthContext, "db">, slug: string) {
  if (slugProblem(slug)) return { slug, available: false, reason: "invalid" as const };
  const taken = await ctx.db.hub.findUnique({ where: { slug }, select: { id: true } });
  return taken ? { slug, available: false, reason: "taken" as const } : { slug, available: true };
}

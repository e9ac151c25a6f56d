import type { AuthContext } from "@/lib/api/context.ts";
import { canDeleteMemory } from "@/lib/api/permissions.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";

export interface Skipped {
  id: string;
  reason: "not_found" | "not_owned" | "conflict";
}

/** Deletes every listed memory the caller may delete, in one transaction; reports the rest. */
export async function batchDeleteMemories(ctx: AuthContext, input: { ids: string[] }) {
  const ids = [...new Set(input.ids)];
  const memberships = new Map((await readableHubs(ctx)).map((m) => [m.hub.id, m]));
  return ctx.db.$transaction(async (tx) => {
    const found = await tx.memory.findMany({
      where: { id: { in: ids.filter(isUuid) }, hubId: { in: [...memberships.keys()] } },
      select: { id: true, hubId: true, ownerId: true },
    });
    const byId = new Map(found.map((m) => [m.id, m]));
    const skipped: Skipped[] = [];
    const deletable: string[] = [];
    for (const id of ids) {
      const memory = byId.get(id);
      const membership = memory && memberships.get(memory.hubId);
      if (!memory || !membership) skipped.push({ id, reason: "not_found" });
      else if (!canDeleteMemory(membership.role, memory.ownerId === ctx.user.id, membership.hub)) skipped.push({ id, reason: "not_owned" });
      else deletable.push(id);
    }
    const { count } = deletable.length ? await tx.memory.deleteMany({ where: { id: { in: deletable } } }) : { count: 0 };
    return { deleted: count, skipped };
  });
}

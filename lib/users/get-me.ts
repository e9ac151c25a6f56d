import { z } from "zod";
import { atLeastOneOf } from "@/lib/api/at-least-one-of.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { serializeHub } from "@/lib/hubs/serialize-hub.ts";
import { memoryCounts } from "@/lib/quotas/memory-counts.ts";
import { periodCounts } from "@/lib/usage/count-usage.ts";
import { SELF_HOSTED_PLAN } from "@/lib/usage/plan-limits.ts";
import { userNameSchema } from "./user-name.ts";

const nameSchema = userNameSchema;

// `display_name` is Memax's field; `name` is Engram's original one. Both rename the user.
export const updateMeBodySchema = atLeastOneOf(z.object({ display_name: nameSchema.optional(), name: nameSchema.optional() }), ["display_name", "name"], {
  message: "provide display_name",
  path: ["display_name"],
});

/**
 * The calling user (Memax's User fields), the hubs this credential reaches with role and memory
 * count, linked sign-in providers, this month's usage (not to a hub-limited key), the personal hub and the credential.
 */
export async function getMe(ctx: AuthContext) {
  // The same counters as GET /v1/usage, so the two never disagree.
  const [user, memberships, providers, usage] = await Promise.all([
    ctx.db.user.findUniqueOrThrow({ where: { id: ctx.user.id } }),
    readableHubs(ctx),
    ctx.db.oAuthAccount.findMany({ where: { userId: ctx.user.id }, select: { provider: true }, distinct: ["provider"] }),
    ctx.credential.hubIds === null ? periodCounts(ctx) : undefined,
  ]);
  const countOf = await memoryCounts(ctx.sql, "hub", memberships.map((m) => m.hub.id));
  // Among the hubs this credential reaches, or none: a key limited to some hubs learns no other hub's id
  // (as it cannot list the account's keys), and one looked up past its reach named a hub it could not use.
  const personalHubId = memberships.find((m) => m.hub.hubType === "personal" && m.hub.ownerId === ctx.user.id)?.hub.id ?? null;
  const unrestricted = ctx.credential.hubIds === null && ctx.credential.scopes.includes("write");
  return {
    user: {
      id: user.id,
      email: user.email,
      name: user.name,
      display_name: user.name,
      avatar_url: user.image ?? "",
      plan: SELF_HOSTED_PLAN,
      personal_plan_id: SELF_HOSTED_PLAN,
      // Hub creation is an account action: keys limited to some hubs or to reading cannot.
      can_create_hub: unrestricted,
      created_at: user.createdAt.toISOString(),
      updated_at: user.updatedAt.toISOString(),
    },
    hubs: memberships
      .sort((a, b) => (a.hub.hubType === b.hub.hubType ? a.hub.id.localeCompare(b.hub.id) : a.hub.hubType === "personal" ? -1 : 1))
      .map((m) => ({ hub: serializeHub(m.hub), role: m.role, memory_count: countOf.get(m.hub.id) ?? 0 })),
    connected_providers: providers.map((p) => p.provider),
    // Account-wide counts (every hub's pushes and recalls): not for a key limited to some hubs, as
    // GET /v1/usage refuses it. Memax's MeResponse has usage optional.
    ...(usage && { usage }),
    personal_hub_id: personalHubId,
    credential: {
      type: ctx.credential.type,
      ...(ctx.credential.id && { id: ctx.credential.id }),
      scopes: [...ctx.credential.scopes],
      hub_scope_mode: ctx.credential.hubIds === null ? "all_accessible" : "hub_allowlist",
      hub_ids: ctx.credential.hubIds === null ? [] : [...ctx.credential.hubIds],
      agent_name: ctx.credential.agentName ?? "",
    },
  };
}

/** Renames the calling user; answers Memax's `{ status, display_name }` plus the updated user. */
export async function updateMe(ctx: AuthContext, input: z.output<typeof updateMeBodySchema>) {
  const name = input.display_name ?? input.name;
  if (!name) throw new ApiError("invalid_request", "provide display_name");
  await ctx.db.user.update({ where: { id: ctx.user.id }, data: { name } });
  const me = await getMe({ ...ctx, user: { ...ctx.user, name } });
  return { status: "updated", display_name: name, user: me.user };
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { hubPermissionOrThrow } from "./hub-access.ts";
import type { UpdateHubBody } from "./hub-fields.ts";
import { serializeHub } from "./serialize-hub.ts";
import { eventsStatement } from "@/lib/events/emit-event.ts";

/** Name, slug and contributor permissions; owner or admin. A personal hub keeps its slug. */
export async function updateHub(ctx: AuthContext, hubId: string, input: UpdateHubBody) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "change hub settings");
  if (input.slug !== undefined && input.slug !== hub.slug && hub.hubType === "personal") {
    throw new ApiError("personal_hub", "A personal hub's slug cannot be changed");
  }
  try {
    const [updated] = await ctx.db.$transaction([
      ctx.db.hub.update({
      where: { id: hub.id },
      data: {
        name: input.name,
        slug: input.slug,
        allowContributorTopics: input.allow_contributor_topics,
        allowContributorDreams: input.allow_contributor_dreams,
        contributorDeletePolicy: input.contributor_delete_policy,
        updatedAt: ctx.now(),
      },
    }),
      eventsStatement(ctx.db, { type: "hub.updated", hubId: hub.id, actorId: ctx.user.id, entityId: hub.id }),
    ]);
    return serializeHub(updated);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("slug_taken", `The slug "${input.slug}" is already taken`, { slug: input.slug });
    throw error;
  }
}

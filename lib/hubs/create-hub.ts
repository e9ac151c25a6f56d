import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { newId } from "@/lib/ids.ts";
import { assertHubRoom } from "./assert-hub-room.ts";
import { deriveSlug } from "./derive-slug.ts";
import type { CreateHubBody } from "./hub-fields.ts";
import { serializeHub } from "./serialize-hub.ts";
import { databaseNow } from "@/lib/db/database-now.ts";

const DERIVED_SLUG_ATTEMPTS = 6;

/**
 * Creates a team hub owned by the caller (owner membership in the same
 * transaction). A given slug that is taken is slug_taken; a derived one gets a
 * random suffix until it is unique — the unique index decides, so concurrent
 * creates cannot share a slug.
 */
export async function createHub(ctx: AuthContext, input: CreateHubBody) {
  const now = ctx.now();
  for (let attempt = 0; attempt < DERIVED_SLUG_ATTEMPTS; attempt++) {
    const slug = input.slug ?? deriveSlug(input.name, attempt > 0);
    if (input.slug === undefined && attempt === 0 && (await ctx.db.hub.findUnique({ where: { slug }, select: { id: true } }))) continue;
    try {
      const hub = await ctx.db.$transaction(async (tx) => {
        await assertHubRoom(tx, ctx.user.id);
        return tx.hub.create({
          data: {
            id: newId(now.getTime()),
            name: input.name,
            slug,
            hubType: "team",
            ownerId: ctx.user.id,
            allowContributorTopics: input.allow_contributor_topics ?? false,
            allowContributorDreams: input.allow_contributor_dreams ?? false,
            contributorDeletePolicy: input.contributor_delete_policy ?? "own",
            createdAt: now,
            updatedAt: now,
            // The database's clock, as the events replayed from it on (see addMember).
            members: { create: { userId: ctx.user.id, role: "owner", joinedAt: await databaseNow(tx) } },
          },
        });
      });
      return serializeHub(hub);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // A unique violation aborted the transaction; the next attempt starts a new one.
      if (input.slug !== undefined) throw new ApiError("slug_taken", `The slug "${input.slug}" is already taken`, { slug: input.slug });
    }
  }
  throw new ApiError("conflict", "Could not find a free slug for this name; give one explicitly");
}

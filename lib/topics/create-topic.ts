import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { hubPermissionOrThrow } from "@/lib/hubs/hub-access.ts";
import { newId } from "@/lib/ids.ts";
import { assertTopicNameFree } from "./assert-topic-name-free.ts";
import { serializeTopic } from "./serialize-topic.ts";
import { MAX_TOPICS_PER_HUB } from "./topic-fields.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";

export interface CreateTopicInput {
  name: string;
  /** Target hub: the body's hub_id, else the X-Hub-ID header; the personal hub when neither is given. */
  hubId?: string;
}

/** A new topic in the target hub; needs topics.manage there (owner, admin, or contributor when the hub allows it). */
export async function createTopic(ctx: AuthContext, input: CreateTopicInput) {
  const hubId = input.hubId ?? (await personalHubId(ctx));
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "topics.manage", "create topics");
  const now = ctx.now();
  try {
    const topic = await ctx.db.$transaction(async (tx) => {
      await assertTopicNameFree(tx, hub.id, input.name);
      const count = await tx.topic.count({ where: { hubId: hub.id } });
      if (count >= MAX_TOPICS_PER_HUB) {
        throw new ApiError("conflict", `A hub can have at most ${MAX_TOPICS_PER_HUB} topics; delete or merge some first`, {
          limit: MAX_TOPICS_PER_HUB,
        });
      }
      const created = await tx.topic.create({
        data: { id: newId(now.getTime()), hubId: hub.id, name: input.name, createdBy: ctx.user.id, createdAt: now, updatedAt: now },
      });
      await emitEvent(tx, { type: "topic.changed", hubId: hub.id, actorId: ctx.user.id, entityId: created.id });
      return created;
    });
    return serializeTopic(topic, 0);
  } catch (error) {
    // The lock makes this unlikely; the unique index is the last word.
    if (isUniqueViolation(error)) throw new ApiError("conflict", `This hub already has a topic named "${input.name}"`);
    throw error;
  }
}

async function personalHubId(ctx: AuthContext): Promise<string> {
  const hub = await ctx.db.hub.findFirst({ where: { ownerId: ctx.user.id, hubType: "personal" }, select: { id: true } });
  if (!hub) throw new ApiError("not_found", "Hub not found");
  return hub.id;
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { hubPermissionOrThrow, lockHubMembers, lockMembershipOrThrow } from "./hub-access.ts";
import { reservedSlugProblem, type UpdateHubBody } from "./hub-fields.ts";
import { hubSettings, serializeHub } from "./serialize-hub.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { onContributorDreamsOff } from "@/lib/notifications/notify.ts";
import { topicsLockKey } from "@/lib/topics/hub-topics.ts";

/** The setting read off before the transaction was on under its lock: the update is done again, exclusively. */
class DreamsTurnedOn extends Error {}

/**
 * Name, slug, contributor permissions, appearance (icon, accent, header aurora
 * mode; "" clears one) and a partial merge into `settings` (null deletes a
 * key); owner or admin. A personal hub keeps its slug, and takes its aurora
 * mode from the user's settings, not the hub.
 */
export async function updateHub(ctx: AuthContext, hubId: string, input: UpdateHubBody) {
  const { hub } = await hubPermissionOrThrow(ctx, hubId, "hub.manage", "change hub settings");
  if (input.slug !== undefined && input.slug !== hub.slug && hub.hubType === "personal") {
    throw new ApiError("personal_hub", "A personal hub's slug cannot be changed");
  }
  const reserved = input.slug !== undefined && input.slug !== hub.slug ? reservedSlugProblem(input.slug) : undefined;
  if (reserved) {
    const message = `slug must be valid: ${reserved}`;
    throw new ApiError("invalid_request", `Request is invalid: slug: ${message}`, { issues: [{ path: "slug", message }] });
  }
  if (input.header_aurora_mode && hub.hubType === "personal") {
    throw new ApiError("personal_hub", "A personal hub's header aurora mode is a user setting, not a hub setting");
  }
  const clearable = (value: string | undefined) => (value === undefined ? undefined : value === "" ? null : value);
  // `exclusive`: the membership lock taken exclusively, for contributors' dream rights taken away.
  const update = (exclusive: boolean) =>
    ctx.db.$transaction(async (tx) => {
      // The caller's role again, under the hub's membership lock: an admin demoted or removed since the
      // check above changes nothing once that change has returned.
      // Contributors' dream rights taken away: the hub's membership lock exclusively, as a demotion takes
      // it, before the caller's role is read under it. Shared, an undo or a decision in flight (which hold
      // it shared) that had read the setting still on reopened or kept a contributor's review row after
      // the rows below were expired, a decision left pending that resolving answered 403.
      if (exclusive) await lockHubMembers(tx, hub.id);
      await lockMembershipOrThrow(tx, ctx, hub, "hub.manage", "change hub settings", { locked: exclusive });
      // Contributors' topic rights: the hub's topic lock, exclusively, as every topic change takes it
      // (after the membership lock, in the same order). A contributor's change already past its check
      // commits before this one, and those after it read the new setting: shared, the membership lock
      // alone let a change in flight land after the setting was answered off.
      if (input.allow_contributor_topics !== undefined) await lockForTransaction(tx, topicsLockKey(hub.id));
      let settings: Record<string, boolean> | undefined;
      if (input.settings) {
        // Read-merge-write under the hub's lock, so two partial patches both land.
        await lockForTransaction(tx, `hub-settings:${hub.id}`);
        const current = await tx.hub.findUniqueOrThrow({ where: { id: hub.id }, select: { settings: true } });
        settings = hubSettings(current.settings);
        for (const [key, value] of Object.entries(input.settings)) {
          if (value === null) delete settings[key];
          else if (value !== undefined) settings[key] = value;
        }
      }
      // Only when the setting is on now (the hub's row held to the update, which would take it anyway): a
      // PATCH repeating it off, as a settings form sends every field, took the exclusive lock, so stalled
      // every write into the hub, to take nothing away. Turned on since the read before this
      // transaction, which took the lock only shared: done again, exclusively.
      // FOR NO KEY UPDATE, the lock the update below takes unless it changes the slug (a unique key: then
      // FOR UPDATE, which waits for inserts naming the hub, as it always did): FOR UPDATE conflicts with the FOR KEY SHARE
      // every insert naming the hub (a memory, a chunk, a topic, a dream run) holds for its foreign key,
      // so the check waited for every write in flight, and every insert after it behind the PATCH.
      let dreamsOff = false;
      if (input.allow_contributor_dreams === false) {
        const [current] = await tx.$queryRaw<{ on: boolean }[]>`SELECT allow_contributor_dreams AS "on" FROM hubs WHERE id = ${hub.id}::uuid FOR NO KEY UPDATE`;
        dreamsOff = current?.on === true;
        if (dreamsOff && !exclusive) throw new DreamsTurnedOn();
      }
      await emitEvent(tx, { type: "hub.updated", hubId: hub.id, actorId: ctx.user.id, entityId: hub.id });
      if (dreamsOff) await onContributorDreamsOff(tx, hub.id, ctx.now());
      return tx.hub.update({
        where: { id: hub.id },
        data: {
          name: input.name,
          slug: input.slug,
          allowContributorTopics: input.allow_contributor_topics,
          allowContributorDreams: input.allow_contributor_dreams,
          contributorDeletePolicy: input.contributor_delete_policy,
          icon: clearable(input.icon),
          accent: clearable(input.accent),
          headerAuroraMode: clearable(input.header_aurora_mode),
          settings,
          updatedAt: ctx.now(),
        },
      });
    });
  try {
    const turnsOff = input.allow_contributor_dreams === false && hub.allowContributorDreams;
    const updated = await update(turnsOff).catch((error: unknown) => (error instanceof DreamsTurnedOn ? update(true) : Promise.reject(error)));
    return serializeHub(updated);
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError("slug_taken", `The slug "${input.slug}" is already taken`, { slug: input.slug });
    throw error;
  }
}

import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { findPersonaOrThrow } from "@/lib/personas/persona-source.ts";
import type { UserSetting } from "@/lib/db/generated/client.ts";
import { dreamConfig } from "@/lib/dreams/dream-config.ts";
import { DEV_FLAGS, DREAM_SWITCHES, type SettingsObject, type THEMES, type UpdateSettingsBody } from "./settings-fields.ts";

const DEFAULTS = { theme: "system", locale: "", notificationsEnabled: true, chatDefaultPersonaId: "" };

type SettingsRow = Omit<UserSetting, "userId" | "updatedAt"> & { updatedAt: Date | null };

/** A person who saved nothing: the columns' defaults (prisma/schema.prisma). */
const UNSAVED: SettingsRow = {
  ...DEFAULTS,
  dreamsExcludedKinds: [],
  dreamsSimilarityThreshold: null,
  dreamsStalenessDays: null,
  hubHeaderAuroraMode: "signature",
  pulseHiddenHubIds: [],
  devFlags: {},
  updatedAt: null,
};

function devFlags(stored: unknown): Record<(typeof DEV_FLAGS)[number], boolean> {
  const flags = stored && typeof stored === "object" && !Array.isArray(stored) ? (stored as Record<string, unknown>) : {};
  return Object.fromEntries(DEV_FLAGS.map((key) => [key, flags[key] === true])) as Record<(typeof DEV_FLAGS)[number], boolean>;
}

type DreamSwitches = Record<(typeof DREAM_SWITCHES)[number], boolean>;

/**
 * Memax's Settings: every field its SDK requires. The similarity threshold and staleness days not set
 * are the install's own (what a dream run uses then), so a client shows the values in force. The dream
 * switches are per hub: these are the personal hub's (a hub without its own switch dreams in full).
 */
function serializeSettings(row: SettingsRow, switches: DreamSwitches): SettingsObject {
  const install = dreamConfig();
  return {
    theme: row.theme as (typeof THEMES)[number],
    locale: row.locale,
    notifications_enabled: row.notificationsEnabled,
    chat_default_persona_id: row.chatDefaultPersonaId,
    ...switches,
    dreams_excluded_kinds: row.dreamsExcludedKinds as SettingsObject["dreams_excluded_kinds"],
    dreams_similarity_threshold: row.dreamsSimilarityThreshold ?? install.duplicateCosine,
    dreams_staleness_days: row.dreamsStalenessDays ?? install.staleDays,
    hub_header_aurora_mode: row.hubHeaderAuroraMode as SettingsObject["hub_header_aurora_mode"],
    pulse_hidden_hub_ids: row.pulseHiddenHubIds,
    dev_flags: devFlags(row.devFlags),
    updated_at: row.updatedAt ? row.updatedAt.toISOString() : null,
  };
}

async function personalHubSwitches(ctx: AuthContext): Promise<DreamSwitches> {
  const hub = await ctx.db.hub.findFirst({ where: { ownerId: ctx.user.id, hubType: "personal" }, select: { settings: true } });
  const own = hub?.settings && typeof hub.settings === "object" && !Array.isArray(hub.settings) ? (hub.settings as Record<string, unknown>) : {};
  return Object.fromEntries(DREAM_SWITCHES.map((key) => [key, typeof own[key] === "boolean" ? own[key] : true])) as DreamSwitches;
}

/** GET /v1/settings — defaults until the person changes something. */
export async function getSettings(ctx: AuthContext) {
  const row = await ctx.db.userSetting.findUnique({ where: { userId: ctx.user.id } });
  return serializeSettings(row ?? UNSAVED, await personalHubSwitches(ctx));
}

/** PATCH /v1/settings — merges the given keys (dev_flags merged flag by flag, lists replaced). */
export async function updateSettings(ctx: AuthContext, input: UpdateSettingsBody) {
  // Memax's SDK (SettingsUpdateInput): the five dream switches moved to each hub's settings, and the
  // server refuses them here by this code, so a client learns where they go rather than seeing them ignored.
  const moved = DREAM_SWITCHES.filter((key) => input[key] !== undefined);
  if (moved.length > 0) {
    throw new ApiError("moved_to_hub_settings", `${moved.join(", ")} ${moved.length === 1 ? "is" : "are"} set per hub: send ${moved.length === 1 ? "it" : "them"} to PATCH /v1/hubs/{id} as { "settings": { … } }`, {
      fields: moved,
      issues: moved.map((path) => ({ path, message: "set per hub (PATCH /v1/hubs/{id} settings)" })),
    });
  }
  const personaId = input.chat_default_persona_id;
  const data = {
    ...(input.chat_default_persona_id !== undefined && { chatDefaultPersonaId: input.chat_default_persona_id }),
    ...(input.theme !== undefined && { theme: input.theme }),
    ...(input.locale !== undefined && { locale: input.locale }),
    ...(input.notifications_enabled !== undefined && { notificationsEnabled: input.notifications_enabled }),
    ...(input.dreams_excluded_kinds !== undefined && { dreamsExcludedKinds: input.dreams_excluded_kinds }),
    ...(input.dreams_similarity_threshold !== undefined && { dreamsSimilarityThreshold: input.dreams_similarity_threshold }),
    ...(input.dreams_staleness_days !== undefined && { dreamsStalenessDays: input.dreams_staleness_days }),
    ...(input.hub_header_aurora_mode !== undefined && { hubHeaderAuroraMode: input.hub_header_aurora_mode }),
    ...(input.pulse_hidden_hub_ids !== undefined && { pulseHiddenHubIds: input.pulse_hidden_hub_ids }),
    updatedAt: ctx.now(),
  };
  const row = await ctx.db.$transaction(async (tx) => {
    if (personaId) {
      // The persona's config held (KEY SHARE) until the default naming it commits: an account-data
      // deletion removing the config meanwhile then waits, and clears the default after it; checked
      // without the lock, the default was written after that deletion and named nothing for good.
      await tx.$queryRaw`SELECT 1 FROM agent_configs WHERE id = ${personaId}::uuid AND owner_id = ${ctx.user.id}::uuid FOR KEY SHARE`;
      await findPersonaOrThrow(tx, ctx.user.id, personaId);
    }
    let locked: { devFlags?: Record<string, boolean>; dreamsSimilarityThreshold?: null; dreamsStalenessDays?: null } = {};
    const followsInstall = { dreamsSimilarityThreshold: input.dreams_similarity_threshold, dreamsStalenessDays: input.dreams_staleness_days };
    if (input.dev_flags !== undefined || Object.values(followsInstall).some((value) => typeof value === "number")) {
      // Read under the row's lock: two PATCHes each flipping one flag both keep theirs. The row is made
      // first if there is none: with nothing to lock, a first PATCH racing another merged into no
      // flags, and its upsert then wrote them over the other's.
      await tx.$executeRaw`INSERT INTO user_settings (user_id, updated_at) VALUES (${ctx.user.id}::uuid, ${data.updatedAt}) ON CONFLICT (user_id) DO NOTHING`;
      const [current] = await tx.$queryRaw<{ flags: unknown; threshold: number | null; days: number | null }[]>`
        SELECT dev_flags AS flags, dreams_similarity_threshold AS threshold, dreams_staleness_days AS days FROM user_settings WHERE user_id = ${ctx.user.id}::uuid FOR UPDATE`;
      if (input.dev_flags !== undefined) {
        const sent = Object.fromEntries(Object.entries(input.dev_flags).filter(([, value]) => value !== undefined));
        locked = { devFlags: { ...devFlags(current?.flags), ...sent } };
      }
      // GET answers the install's value for a field never set, and Memax's clients send the whole object
      // back to change one field: stored, that echo pinned the install's value as the person's own, and
      // an operator's later change no longer reached them. Sending the value in force for an unset field
      // leaves it unset; a value the person saved stays theirs, whatever it equals.
      const install = dreamConfig();
      if (current?.threshold == null && followsInstall.dreamsSimilarityThreshold === install.duplicateCosine) locked.dreamsSimilarityThreshold = null;
      if (current?.days == null && followsInstall.dreamsStalenessDays === install.staleDays) locked.dreamsStalenessDays = null;
    }
    return tx.userSetting.upsert({
      where: { userId: ctx.user.id },
      create: { userId: ctx.user.id, ...DEFAULTS, ...data, ...locked },
      update: { ...data, ...locked },
    });
  });
  return serializeSettings(row, await personalHubSwitches(ctx));
}

import { z } from "zod";
import { isUuid, normalizeId } from "@/lib/ids.ts";
import { KINDS } from "@/lib/memories/memory-fields.ts";
import { HEADER_AURORA_MODES } from "@/lib/hubs/hub-fields.ts";

export const THEMES = ["system", "light", "dark"] as const;

/**
 * Bounds of the dream tuning a person may set (docs/dreams.md). Below 0.5 a "near-duplicate" is any two
 * memories on one subject, and merging them archives real knowledge; at 1 nothing but byte-equal
 * vectors merge. Under a week a note not yet read is archived as stale; ten years is "never".
 */
export const SIMILARITY_THRESHOLD_RANGE = { min: 0.5, max: 0.99 } as const;
export const STALENESS_DAYS_RANGE = { min: 7, max: 3650 } as const;
/** Hubs a person may mute from the pulse view: more than a person's hubs is only stored bytes. */
export const MAX_PULSE_HIDDEN_HUBS = 200;
/** Memax's DevFlagsSettings: the only keys, all booleans (a bounded object, not a free-form store). */
export const DEV_FLAGS = ["mockDreams", "mockDreaming", "mockEmptyInbox", "mockProUser", "debuggerEnabled", "skipRerank"] as const;
/** The dream switches Memax's dashboard toggles (the SDK reads them back from GET /v1/settings). */
export const DREAM_SWITCHES = ["dreams_enabled", "dreams_merge_enabled", "dreams_archive_enabled", "dreams_organize_enabled", "dreams_restructure_enabled"] as const;

const dreamSwitches = Object.fromEntries(DREAM_SWITCHES.map((key) => [key, z.boolean().optional()])) as Record<(typeof DREAM_SWITCHES)[number], z.ZodOptional<z.ZodBoolean>>;

/** PATCH /v1/settings: the known keys only — anything else is a 400 naming it (a typo must not look saved). */
export const updateSettingsBodySchema = z.strictObject({
  theme: z.enum(THEMES).optional(),
  // "" clears it (clients then follow the browser); otherwise a language tag such as "en", "zh" or "pt-BR".
  locale: z
    .string()
    // RFC 5646 asks for room for 35 characters; without a bound the pattern let megabytes of subtags in.
    .max(35, "locale is at most 35 characters")
    .regex(/^$|^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, "locale must be a language tag such as en, zh or pt-BR, or \"\" to clear it")
    .meta({ keepEmpty: true })
    .optional(),
  notifications_enabled: z.boolean().optional(),
  // The persona agent chat sessions inherit ("" none); a session's own persona_id overrides it.
  // Persona ids are UUIDs: anything else is a malformed value (400), not a persona that is not there (404).
  // Lowered as every id is where it enters: kept as sent, an upper-case id was answered back unlike the
  // persona's own, and a client comparing the two found no default.
  chat_default_persona_id: z
    .string()
    .max(100)
    .overwrite(normalizeId)
    .refine((value) => value === "" || isUuid(value), "chat_default_persona_id must be a persona id, or \"\" for none")
    .meta({ keepEmpty: true })
    .optional(),
  // Parsed only to be refused by name (moved_to_hub_settings, updateSettings): they are per hub now.
  ...dreamSwitches,
  // Memories of these kinds are never merged, archived or filed by a dream run of the person's hubs.
  dreams_excluded_kinds: z
    .array(z.enum(KINDS))
    .max(KINDS.length * 4)
    .transform((kinds) => [...new Set(kinds)])
    .optional(),
  dreams_similarity_threshold: z
    .number()
    .min(SIMILARITY_THRESHOLD_RANGE.min, `dreams_similarity_threshold must be between ${SIMILARITY_THRESHOLD_RANGE.min} and ${SIMILARITY_THRESHOLD_RANGE.max}`)
    .max(SIMILARITY_THRESHOLD_RANGE.max, `dreams_similarity_threshold must be between ${SIMILARITY_THRESHOLD_RANGE.min} and ${SIMILARITY_THRESHOLD_RANGE.max}`)
    // null: back to the install's own (what GET answers while unset), so an operator's change reaches it again.
    .nullable()
    .optional(),
  dreams_staleness_days: z
    .number()
    .int("dreams_staleness_days must be a whole number of days")
    .min(STALENESS_DAYS_RANGE.min, `dreams_staleness_days must be between ${STALENESS_DAYS_RANGE.min} and ${STALENESS_DAYS_RANGE.max}`)
    .max(STALENESS_DAYS_RANGE.max, `dreams_staleness_days must be between ${STALENESS_DAYS_RANGE.min} and ${STALENESS_DAYS_RANGE.max}`)
    .nullable()
    .optional(),
  // The aurora of the person's personal hub header (a team hub keeps its own, PATCH /v1/hubs/{id}).
  hub_header_aurora_mode: z.enum(HEADER_AURORA_MODES).optional(),
  // Merged into the stored flags: a client may send only the one it flips.
  dev_flags: z.strictObject(Object.fromEntries(DEV_FLAGS.map((key) => [key, z.boolean().optional()])) as Record<(typeof DEV_FLAGS)[number], z.ZodOptional<z.ZodBoolean>>).optional(),
  // Replaces the list. Lowered as every id is where it enters, and each kept once.
  pulse_hidden_hub_ids: z
    .array(z.string().max(100).overwrite(normalizeId).refine(isUuid, "pulse_hidden_hub_ids must hold hub ids"))
    .max(MAX_PULSE_HIDDEN_HUBS, `pulse_hidden_hub_ids holds at most ${MAX_PULSE_HIDDEN_HUBS} hubs`)
    .transform((ids) => [...new Set(ids)])
    .optional(),
});
export type UpdateSettingsBody = z.output<typeof updateSettingsBodySchema>;

/** The settings object as zod (Memax's Settings): serializeSettings is typed by it and the OpenAPI document publishes it. */
export const settingsObjectSchema = z
  .object({
    theme: z.enum(THEMES),
    locale: z.string(),
    notifications_enabled: z.boolean(),
    chat_default_persona_id: z.string(),
    dreams_enabled: z.boolean().meta({ description: "The personal hub's switch (set per hub: PATCH /v1/hubs/{id} settings). false: scheduled dream runs skip the hub (a manual trigger still runs)" }),
    dreams_merge_enabled: z.boolean(),
    dreams_archive_enabled: z.boolean(),
    dreams_organize_enabled: z.boolean(),
    dreams_restructure_enabled: z.boolean().meta({ description: "Kept for Memax's clients; Engram's runs have no restructure step" }),
    dreams_excluded_kinds: z.array(z.enum(KINDS)),
    dreams_similarity_threshold: z.number().meta({ description: `Cosine at which two memories may merge (${SIMILARITY_THRESHOLD_RANGE.min}..${SIMILARITY_THRESHOLD_RANGE.max}); unset: the install's 0.9` }),
    dreams_staleness_days: z.int().meta({ description: `Days unread and unchanged before a memory is archived as stale (${STALENESS_DAYS_RANGE.min}..${STALENESS_DAYS_RANGE.max}); unset: ENGRAM_DREAM_STALE_DAYS` }),
    hub_header_aurora_mode: z.enum(HEADER_AURORA_MODES),
    pulse_hidden_hub_ids: z.array(z.string()),
    dev_flags: z.object(Object.fromEntries(DEV_FLAGS.map((key) => [key, z.boolean()])) as Record<(typeof DEV_FLAGS)[number], z.ZodBoolean>),
    updated_at: z.string().nullable(),
  })
  .meta({ id: "Settings" });
export type SettingsObject = z.output<typeof settingsObjectSchema>;

import { z } from "zod";
import { isUuid, normalizeId } from "@/lib/ids.ts";

export const THEMES = ["system", "light", "dark"] as const;

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
});
export type UpdateSettingsBody = z.output<typeof updateSettingsBodySchema>;

import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { uuidField } from "@/lib/ids.ts";
import { MANAGED_ROLES } from "@/lib/api/permissions.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import { NO_CONTROL_CHARACTERS } from "@/lib/users/user-name.ts";

/** Documented limits of hubs (docs/hubs.md). */
export const MAX_HUB_NAME_LENGTH = 100;
/** Members embedded in hub detail; the full list is GET /v1/hubs/:id/members. */
export const DETAIL_MEMBERS_LIMIT = 100;
export const TRANSFER_TTL_MS = 7 * 24 * 60 * 60 * 1000;
/**
 * Hubs one user may belong to (personal hub included). GET /v1/hubs returns
 * them all as one array, so this cap is what keeps that response bounded;
 * creating, joining or being added past it is 409 hub_limit_reached.
 */
export const MAX_HUBS_PER_USER = 100;
/**
 * Members one hub may have: hub detail, summaries, member lists and every notification fan-out to
 * a hub's managers grow with it. ENGRAM_HUB_MAX_MEMBERS, default 1,000; joining or being added past
 * it is 409 member_limit_reached.
 */
export function maxHubMembers(): number {
  return positiveIntEnv("ENGRAM_HUB_MAX_MEMBERS", 1000);
}
export const MAX_HUB_ICON_LENGTH = 64;
export const HUB_ACCENTS = ["violet", "blue", "green", "amber", "rose", "slate"] as const;
export const HEADER_AURORA_MODES = ["none", "signature", "time"] as const;
/** The per-hub dream settings a client may set (Memax's HubSettings allow-list). */
export const HUB_SETTING_KEYS = [
  "dreams_enabled",
  "dreams_merge_enabled",
  "dreams_archive_enabled",
  "dreams_organize_enabled",
  "dreams_restructure_enabled",
] as const;

export const SLUG_RE = /^[a-z0-9][a-z0-9-]{1,46}[a-z0-9]$/;
/** Personal hubs are `personal-<hex>`; no team hub may take that shape. */
export const RESERVED_SLUG_PREFIX = "personal-";
/**
 * Hubs deleted before their slug became unchoosable (deleteHub) kept `deleted-<id without dashes>` until
 * purged; a hub id is no secret, so a hub that took that slug first made the owner's delete fail on the
 * unique index for good. The prefix stays reserved so no new hub looks like one of them.
 */
export const DELETED_SLUG_PREFIX = "deleted-";
export const DELETE_POLICIES = ["none", "own", "any"] as const;

/** Why a new slug (a create's, or a rename's to another slug) may not use a reserved prefix, or undefined. */
export function reservedSlugProblem(slug: string): string | undefined {
  if (slug.startsWith(RESERVED_SLUG_PREFIX)) return `the "${RESERVED_SLUG_PREFIX}" prefix is reserved for personal hubs`;
  if (slug.startsWith(DELETED_SLUG_PREFIX)) return `the "${DELETED_SLUG_PREFIX}" prefix is reserved for deleted hubs`;
  return undefined;
}

export function slugProblem(slug: string): string | undefined {
  if (!SLUG_RE.test(slug)) return "3 to 48 lowercase letters, digits or '-', starting and ending with a letter or digit";
  return reservedSlugProblem(slug);
}

const slugSchema = z.string().superRefine((slug, ctx) => {
  const problem = slugProblem(slug);
  if (problem) ctx.addIssue({ code: "custom", message: `slug must be ${problem.startsWith("the") ? "valid: " : ""}${problem}` });
});

// No control characters: the hub's name is written into invitation e-mails ("… invited you to join
// <hub>"), where line breaks would let it write its own paragraphs and links (as for display names).
const nameSchema = z
  .string()
  .trim()
  .min(1, "name must not be empty")
  .max(MAX_HUB_NAME_LENGTH, `name is at most ${MAX_HUB_NAME_LENGTH} characters`)
  .regex(NO_CONTROL_CHARACTERS, "name must not contain control characters such as line breaks");

const settings = {
  allow_contributor_topics: z.boolean().optional(),
  allow_contributor_dreams: z.boolean().optional(),
  contributor_delete_policy: z.enum(DELETE_POLICIES).optional(),
};

export const createHubBodySchema = z.strictObject({ name: nameSchema, slug: slugSchema.optional(), ...settings });
export type CreateHubBody = z.output<typeof createHubBodySchema>;

/** `""` clears an appearance field (back to the default), so the lenient parser must keep it. */
const appearance = {
  icon: z.string().trim().max(MAX_HUB_ICON_LENGTH, `icon is at most ${MAX_HUB_ICON_LENGTH} characters`).meta({ keepEmpty: true }).optional(),
  accent: z.union([z.enum(HUB_ACCENTS), z.literal("")]).meta({ keepEmpty: true }).optional(),
  header_aurora_mode: z.union([z.enum(HEADER_AURORA_MODES), z.literal("")]).meta({ keepEmpty: true }).optional(),
  // A partial merge into hub.settings; null deletes a key's override.
  settings: z.strictObject(Object.fromEntries(HUB_SETTING_KEYS.map((key) => [key, z.boolean().nullable().optional()])) as Record<(typeof HUB_SETTING_KEYS)[number], z.ZodOptional<z.ZodNullable<z.ZodBoolean>>>).optional(),
};

// An empty patch is a no-op that returns the hub (clients may send only fields this server ignores).
// The slug's shape only: a personal hub's own `personal-…` slug sent back unchanged (a client echoing the
// hub it read) is a no-op, so the reserved prefixes are checked against the hub in updateHub.
const updateSlugSchema = z.string().regex(SLUG_RE, "slug must be 3 to 48 lowercase letters, digits or '-', starting and ending with a letter or digit");
export const updateHubBodySchema = z.strictObject({ name: nameSchema.optional(), slug: updateSlugSchema.optional(), ...settings, ...appearance });
export type UpdateHubBody = z.output<typeof updateHubBodySchema>;

// No length bound of its own: a slug too long is answered `invalid` (checkSlug never looks such a one up);
// a bound here made it a 400 whose message, the missing field's, said "slug is required".
export const checkSlugQuerySchema = z.object({ slug: z.string({ error: "slug is required" }) });

export const listQuerySchema = z.object({ limit: z.string().optional(), cursor: cursorSchema.optional() });
export type ListQuery = z.output<typeof listQuerySchema>;

export const addMemberBodySchema = z.strictObject({ user_id: uuidField("user_id must be a user id"), role: z.enum(MANAGED_ROLES) });
export type AddMemberBody = z.output<typeof addMemberBodySchema>;

export const updateMemberBodySchema = z.strictObject({ role: z.enum(MANAGED_ROLES) });

export const createTransferBodySchema = z.strictObject({ target_user_id: uuidField("target_user_id must be a user id") });

import { z } from "zod";

/** The hub object as zod: serializeHub is typed by it and the OpenAPI document publishes it. */
export const hubObjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    hub_type: z.enum(["personal", "team"]),
    owner_id: z.string(),
    icon: z.string().optional(),
    accent: z.string().optional(),
    header_aurora_mode: z.string().optional(),
    settings: z.record(z.string(), z.boolean()),
    allow_contributor_topics: z.boolean(),
    allow_contributor_dreams: z.boolean(),
    contributor_delete_policy: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: "Hub" });
export type HubObject = z.output<typeof hubObjectSchema>;

/** A member; e-mail addresses are masked for viewers below admin (except their own row). */
export const memberObjectSchema = z
  .object({
    user_id: z.string(),
    role: z.string().meta({ description: "owner, admin, contributor or viewer" }),
    name: z.string(),
    email: z.string(),
    user_name: z.string(),
    user_email: z.string(),
    user_avatar_url: z.string(),
    joined_at: z.string(),
  })
  .meta({ id: "Member" });
export type MemberObject = z.output<typeof memberObjectSchema>;

export const transferObjectSchema = z
  .object({
    id: z.string(),
    hub_id: z.string(),
    from_user_id: z.string(),
    initiated_by: z.string(),
    target_user_id: z.string(),
    state: z.string().meta({ description: "pending, accepted, canceled or expired" }),
    created_at: z.string(),
    expires_at: z.string(),
    resolved_at: z.string().nullable(),
    accepted_at: z.string().nullable(),
    cancelled_at: z.string().nullable(),
  })
  .meta({ id: "OwnershipTransfer" });
export type TransferObject = z.output<typeof transferObjectSchema>;

/** GET /v1/hubs: one entry per hub the caller belongs to. */
export const hubListEntrySchema = z
  .object({ hub: hubObjectSchema, role: z.string(), memory_count: z.int(), member_count: z.int() })
  .meta({ id: "HubListEntry" });

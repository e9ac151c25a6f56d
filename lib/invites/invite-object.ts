import { z } from "zod";

/** The invite object as zod: serializeInvite is typed by it and the OpenAPI document publishes it. */
export const inviteObjectSchema = z
  .object({
    id: z.string(),
    hub_id: z.string(),
    role: z.string(),
    email: z.string().nullable(),
    token: z.string().optional().meta({ description: "Only right after create or regenerate" }),
    invite_url: z.string().optional().meta({ description: "Only right after create or regenerate" }),
    created_by: z.string(),
    invited_by: z.string(),
    invitee_user_id: z.string().nullable(),
    invitee_email: z.string().nullable(),
    created_at: z.string(),
    expires_at: z.string(),
    state: z.string().meta({ description: "active, accepted, revoked or expired" }),
    last_sent_at: z.string().nullable(),
    email_enqueued_at: z.string().nullable(),
    accepted_by: z.string().nullable(),
    accepted_at: z.string().nullable(),
  })
  .meta({ id: "Invite" });
export type InviteObject = z.output<typeof inviteObjectSchema>;

import { z } from "zod";

/** A key as the API shows it (never the secret); Memax's field names. serializeApiKey is typed by this schema. */
export const apiKeyObjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    scope: z.string().meta({ description: '"all" for every hub the user belongs to, else the allowlisted hubs\' slugs, comma-separated' }),
    scopes: z.array(z.string()).meta({ description: '"read" and/or "write"' }),
    hub_id: z.string().nullable().meta({ description: "The first allowlisted hub, or null" }),
    hub_ids: z.array(z.string()),
    hub_scope_mode: z.enum(["all_accessible", "hub_allowlist"]),
    agent_name: z.string(),
    standalone: z.boolean(),
    permissions: z.array(z.string()),
    default_permissions: z.array(z.string()),
    trust_level: z.string().nullable(),
    created_at: z.string(),
    expires_at: z.string().nullable(),
    last_used: z.string().nullable(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
  })
  .meta({ id: "ApiKey" });

/** POST /v1/auth/api-keys: the key object plus its secret, shown this once. */
export const createdApiKeySchema = apiKeyObjectSchema
  .extend({ key: z.string().meta({ description: "The secret (egk_…); shown in this response only" }) })
  .meta({ id: "CreatedApiKey" });

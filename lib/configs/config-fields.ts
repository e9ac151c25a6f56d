import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";

/** Documented limits of agent configs (docs/configs.md). */
export const MAX_CONFIG_BYTES = 512 * 1024;
export const MAX_CONFIGS_PER_USER = 500;
/** Stored versions per config; older ones are pruned. */
export const MAX_VERSIONS_KEPT = 50;
/** How long a deleted config's content stays restorable. */
export const DELETED_RETENTION_DAYS = 30;
/** Devices whose sync state a config keeps: the most recently synced ones. */
export const MAX_DEVICES_PER_CONFIG = 100;
export const MAX_MANIFEST_ENTRIES = 1000;
export const MAX_BATCH_IDS = 100;

export const agentSchema = z
  .string({ error: "agent is required" })
  .trim()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "agent is a slug of letters, digits, '.', '_' or '-' (at most 64)");

/**
 * Bytes (UTF-8) a file_path and a scope may take together on a write: with the owner and agent they
 * are one entry of agent_configs' unique index, which holds at most 2704 bytes (the owner, a 64-byte
 * agent, headers and alignment take up to about 110 of them). The character limits alone let 512 + 600
 * characters of three-byte text through, and the insert failed in the index (500). Only a PUT that
 * creates a file is held to it (upsert-config.ts): a name stored before (each within its character
 * limit) is still synced, acked, listed, deleted and restored, and a new version of it fits the
 * entry the name already has, whatever its bytes.
 */
export const MAX_CONFIG_KEY_BYTES = 2560;

export const filePathSchema = z
  .string({ error: "file_path is required" })
  .trim()
  .min(1, "file_path must not be empty")
  .max(512, "file_path is at most 512 characters")
  .refine((p) => !p.startsWith("/") && !p.includes("\\") && !p.includes("\0"), "file_path is a relative path with '/' separators")
  .refine((p) => !p.split("/").some((segment) => segment === ".." || segment === ""), "file_path must not contain '..' or empty segments")
  // The two refines above, for the OpenAPI document: relative, '/'-separated, no empty or '..' segment.
  .meta({ pattern: "^(?!(.*/)?\\.\\.(/|$))[^/\\\\\\u0000]+(/[^/\\\\\\u0000]+)*$" });

export const scopeSchema = z
  .string({ error: "scope is required" })
  .trim()
  .max(600, "scope is at most 600 characters")
  // A pattern rather than a refine, so the OpenAPI document states the rule: a project id is any
  // text ([\s\S]), a profile name is file-name safe.
  .regex(/^(global|project:[\s\S]+|profile:[A-Za-z0-9][A-Za-z0-9._-]*)$/, 'scope is "global", "project:<id>" or "profile:<name>"');

const deviceIdSchema = z.string().trim().min(1, "device_id must not be empty").max(128, "device_id is at most 128 characters").regex(/\S/, "device_id must not be blank");
const localPathSchema = z.string().max(4096, "local_path is at most 4096 characters");
const hashSchema = z.string().trim().regex(/^[0-9a-f]{64}$/i, "content_hash is a hex SHA-256").transform((h) => h.toLowerCase());

export const upsertConfigBodySchema = z
  .object({
    agent: agentSchema,
    file_path: filePathSchema,
    scope: scopeSchema,
    content: z.string({ error: "content is required" }),
    device_id: deviceIdSchema.optional(),
    local_path: localPathSchema.optional(),
  });
export type UpsertConfigBody = z.output<typeof upsertConfigBodySchema>;

export const listConfigsQuerySchema = z.object({
  agent: agentSchema.optional(),
  scope: scopeSchema.optional(),
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
});
export type ListConfigsQuery = z.output<typeof listConfigsQuerySchema>;

export const syncConfigsBodySchema = z.object({
  device_id: deviceIdSchema,
  configs: z
    .array(
      z.object({
        agent: agentSchema,
        file_path: filePathSchema,
        scope: scopeSchema,
        content_hash: hashSchema,
        // Informational only: the decision never compares clocks.
        updated_at: z.string().optional(),
        local_path: localPathSchema.optional(),
      }),
    )
    .max(MAX_MANIFEST_ENTRIES, `configs has at most ${MAX_MANIFEST_ENTRIES} entries`)
    .default([]),
});
export type SyncConfigsBody = z.output<typeof syncConfigsBodySchema>;

export const ackConfigsBodySchema = z.object({
  device_id: deviceIdSchema,
  configs: z
    .array(
      z.object({
        agent: agentSchema,
        file_path: filePathSchema,
        scope: scopeSchema,
        content_hash: hashSchema.optional(),
        version: z.number().int().min(1),
        local_path: localPathSchema.optional(),
        deleted: z.boolean().optional(),
      }),
    )
    .max(MAX_MANIFEST_ENTRIES, `configs has at most ${MAX_MANIFEST_ENTRIES} entries`),
});
export type AckConfigsBody = z.output<typeof ackConfigsBodySchema>;

export const localDeleteBodySchema = z.object({
  device_id: deviceIdSchema,
  agent: agentSchema,
  file_path: filePathSchema,
  scope: scopeSchema,
  local_path: localPathSchema.optional(),
});
export type LocalDeleteBody = z.output<typeof localDeleteBodySchema>;

export const restoreConfigBodySchema = z.object({
  agent: agentSchema,
  file_path: filePathSchema,
  scope: scopeSchema.optional(),
  device_id: deviceIdSchema.optional(),
  local_path: localPathSchema.optional(),
});
export type RestoreConfigBody = z.output<typeof restoreConfigBodySchema>;

export const batchDeleteConfigsBodySchema = z.object({
  // Lowercased, so one config named in two cases is one id (the second was skipped as not_found).
  // Each id bounded as memories' batch ids are: an unknown id is skipped and echoed back, whole.
  ids: z
    .array(z.string().min(1, "ids must not be empty strings").max(100, "ids are at most 100 characters").toLowerCase())
    .min(1, "ids must not be empty")
    .max(MAX_BATCH_IDS, `ids has at most ${MAX_BATCH_IDS} entries`),
});

export const mergeConfigsBodySchema = z.object({
  local_content: z.string().max(MAX_CONFIG_BYTES, "local_content is at most 512 KiB"),
  cloud_content: z.string().max(MAX_CONFIG_BYTES, "cloud_content is at most 512 KiB"),
  file_path: z.string().optional(),
  agent: z.string().optional(),
});
export type MergeConfigsBody = z.output<typeof mergeConfigsBodySchema>;

/** One config's identity: the unique key of agent_configs for its owner. */
export function configKey(c: { agent: string; file_path?: string; filePath?: string; scope: string }): string {
  return `${c.agent}\u0000${c.file_path ?? c.filePath}\u0000${c.scope}`;
}

import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { AgentConfig } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";
import { atxHeading } from "@/lib/processing/markdown-lines.ts";

/** Identity files by name (any directory, any case): OpenClaw-style SOUL.md and IDENTITY.md, and PERSONA.md. */
const IDENTITY_FILES = ["soul.md", "identity.md", "persona.md"];

/**
 * Which synced configs are personas: a live identity file by name, or a markdown file in a
 * `personas` directory, unless its persona was deleted at the file's current version.
 */
export function isPersonaConfig(config: Pick<AgentConfig, "filePath" | "deletedAt" | "version" | "personaHiddenVersion">): boolean {
  if (config.deletedAt || config.personaHiddenVersion === config.version) return false;
  const path = config.filePath.toLowerCase();
  const name = path.split("/").pop() ?? "";
  return IDENTITY_FILES.includes(name) || (/(^|\/)personas\//.test(path) && path.endsWith(".md"));
}

/** The persona's name: the file's first heading, else the file name in a personas directory, else the agent's identity file. */
export function personaName(config: Pick<AgentConfig, "agent" | "filePath" | "content">): string {
  const heading = firstHeading(config.content);
  if (heading) return heading.slice(0, 100);
  const file = config.filePath.split("/").pop() ?? config.filePath;
  const base = file.replace(/\.md$/i, "");
  return /(^|\/)personas\//i.test(config.filePath) ? base : `${config.agent} ${base}`;
}

/** The text of the first level 1–3 heading that has any. */
function firstHeading(content: string): string | undefined {
  for (const line of content.split("\n")) {
    const heading = atxHeading(line);
    if (heading && heading.level <= 3 && heading.text) return heading.text;
  }
  return undefined;
}

/** Memax's Persona. */
export function serializePersona(config: AgentConfig) {
  return {
    id: config.id,
    owner_id: config.ownerId,
    source_agent: config.agent,
    source_scope: config.scope,
    source_file_path: config.filePath,
    name: personaName(config),
    content: config.content,
    content_hash: config.contentHash,
    version: config.version,
    created_at: config.createdAt.toISOString(),
    updated_at: config.updatedAt.toISOString(),
  };
}

/** What findPersonaOrThrow reads of the persona's config: its identity, never its content (up to 512 KiB no caller needs). */
export const personaHead = { id: true, ownerId: true, agent: true, filePath: true, scope: true, deletedAt: true, version: true, personaHiddenVersion: true } as const;
export type PersonaHead = Pick<AgentConfig, keyof typeof personaHead>;

/** One of the caller's personas by id (its config's id); anything else is not found. */
export async function findPersonaOrThrow(db: DbClient, ownerId: string, id: string): Promise<PersonaHead> {
  const config = isUuid(id) ? await db.agentConfig.findFirst({ where: { id, ownerId }, select: personaHead }) : null;
  if (!config || !isPersonaConfig(config)) throw new ApiError("not_found", "Persona not found");
  return config;
}

import { ApiError } from "@/lib/api/errors.ts";
import type { DbClient } from "@/lib/db/database.ts";
import type { AgentConfig } from "@/lib/db/generated/client.ts";
import { isUuid } from "@/lib/ids.ts";

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

/**
 * The text of the first level 1–3 ATX heading, without a closing run of `#`. Read line by line with
 * plain string operations: the one-regex form (`^#{1,3}\s+(.+?)\s*#*\s*$`) backtracks cubically on
 * a heading followed by a long run of spaces, so one synced file froze the server for minutes.
 */
function firstHeading(content: string): string | undefined {
  for (let start = 0; start < content.length; ) {
    const end = content.indexOf("\n", start);
    const line = content.slice(start, end === -1 ? content.length : end);
    start = end === -1 ? content.length : end + 1;
    const marks = /^#{1,3}[ \t]/.exec(line);
    if (!marks) continue;
    const text = line.slice(marks[0].length).trimEnd();
    let cut = text.length;
    while (cut > 0 && text[cut - 1] === "#") cut--;
    const name = text.slice(0, cut).trim();
    if (name) return name;
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

/** One of the caller's personas by id (its config's id); anything else is not found. */
export async function findPersonaOrThrow(db: DbClient, ownerId: string, id: string): Promise<AgentConfig> {
  const config = isUuid(id) ? await db.agentConfig.findFirst({ where: { id, ownerId } }) : null;
  if (!config || !isPersonaConfig(config)) throw new ApiError("not_found", "Persona not found");
  return config;
}

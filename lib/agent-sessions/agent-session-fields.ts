import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { agentSchema } from "@/lib/configs/config-fields.ts";

/** Documented limits of agent sessions (docs/configs.md). */
export const MAX_SESSION_BYTES = 5 * 1024 * 1024;
/**
 * The request body PUT reads: the JSON string of a 5 MiB file may be six times its bytes (a control
 * character is one byte and "\u0001" six), and under the 8 MiB every other body gets a session of
 * escaped lines was refused as body_too_large long before the documented 5 MiB. The rest of the body
 * (title, project_path, …) is bounded by its own fields, well within the margin.
 */
export const MAX_SESSION_BODY_BYTES = 6 * MAX_SESSION_BYTES + 64 * 1024;
/** Session files one user may keep. */
export const MAX_SESSIONS_PER_USER = 1000;
/** Bytes of session files one user may keep in all. */
export const MAX_SESSION_BYTES_PER_USER = 1024 * 1024 * 1024;
/** Sessions a listing returns with their content (session_id given): each may be 5 MiB. */
export const MAX_SESSIONS_WITH_CONTENT = 5;
/**
 * Bytes of session content one listing page carries: five 5 MiB files were 25 MiB of content, up to
 * 150 MiB of JSON once escaped, in one response. A page stops before the session that would take it
 * past this (its first session is always served), the rest behind next_cursor.
 */
export const MAX_SESSION_CONTENT_BYTES_PER_PAGE = MAX_SESSION_BYTES;

export const putAgentSessionBodySchema = z.object({
  agent: agentSchema,
  session_id: z.string({ error: "session_id is required" }).trim().min(1, "session_id must not be empty").max(200, "session_id is at most 200 characters"),
  content: z.string({ error: "content is required" }),
  title: z.string().max(200, "title is at most 200 characters").optional(),
  project_path: z.string().max(4096).optional(),
  device_id: z.string().max(128).optional(),
  content_type: z.string().max(100).optional(),
});
export type PutAgentSessionBody = z.output<typeof putAgentSessionBodySchema>;

export const listAgentSessionsQuerySchema = z.object({
  agent: agentSchema.optional(),
  // Trimmed as PUT trims it: " s-1 " names the session PUT stored as "s-1"; blank is no filter.
  session_id: z.string().trim().max(200).optional(),
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
});
export type ListAgentSessionsQuery = z.output<typeof listAgentSessionsQuerySchema>;

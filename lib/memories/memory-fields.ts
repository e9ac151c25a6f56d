import { z } from "zod";
import { cursorSchema } from "@/lib/api/pagination.ts";
import { normalizeId, uuidField } from "@/lib/ids.ts";
import { timestampSchema } from "@/lib/api/timestamp.ts";
import { atLeastOneOf } from "@/lib/api/at-least-one-of.ts";
import { uploadFilenameSchema } from "@/lib/uploads/upload-filename-schema.ts";

export const KINDS = ["episodic", "semantic", "procedural", "rationale"] as const;
export const STABILITIES = ["volatile", "evolving", "stable"] as const;
export const CONTENT_TYPES = ["text", "markdown", "code", "chat", "transcript", "file", "structured", "link"] as const;
export const SOURCES = ["cli", "import", "hook", "web", "api", "sdk", "mcp", "extraction"] as const;
export const INITIATION_TYPES = ["human_direct", "human_requested_agent", "agent_proactive", "agent_automatic", "import", "unknown"] as const;
export const STATES = ["active", "processing", "archived"] as const;

export type Kind = (typeof KINDS)[number];
export type Stability = (typeof STABILITIES)[number];
export type ContentType = (typeof CONTENT_TYPES)[number];

/** Documented limits (decisions.md). */
export const MAX_CONTENT_BYTES = 3 * 1024 * 1024;
/**
 * The body a memory's push or edit is read under (REST and MCP alike): the largest content in its
 * worst-case JSON encoding, six bytes a byte ("\u0001"; Python's json.dumps writes a 4-byte emoji as
 * 12), beside the other fields at their bounds (about 43,000 characters, project_context's 32 values of
 * 1,000 the most, each escaped at worst in 12 bytes: about 520 KB). Under the 8 MiB other bodies get,
 * such content was refused with 413 well within its limit.
 */
export const MAX_MEMORY_BODY_BYTES = 6 * MAX_CONTENT_BYTES + 1024 * 1024;
export const MAX_TAGS = 50;
export const MAX_TAG_LENGTH = 64;
export const MAX_TITLE_LENGTH = 200;
/** A memory's hint and hub_reason, each. */
export const MAX_HINT_CHARS = 2000;
export const MAX_HUB_REASON_CHARS = 2000;
/** A memory's source_agent and assisted_by_agent, each. */
export const MAX_AGENT_NAME_CHARS = 100;
export const MAX_BATCH_IDS = 100;

/**
 * A decision gate's answer is kept at `decision-gates/<gate id>`, and gate ids are shown on the board:
 * a push there would put someone's own memory where the gate's answer is written. Only that answer
 * may use the prefix (createMemory's `gateAnswer`).
 */
export const DECISION_GATE_PATH_PREFIX = "decision-gates/";

const tagsSchema = z
  .array(z.string().trim().min(1, "tags must not be empty").max(MAX_TAG_LENGTH, `tags are at most ${MAX_TAG_LENGTH} characters`))
  .max(MAX_TAGS, `at most ${MAX_TAGS} tags`)
  .transform((tags) => [...new Set(tags)]);

const titleSchema = z.string().trim().min(1, "title must not be empty").max(MAX_TITLE_LENGTH, `title is at most ${MAX_TITLE_LENGTH} characters`);

const shortText = (max: number) => z.string().trim().min(1).max(max);

/** Free-form client label (`sdk`, `cli`, `mcp/capture`, …); at most this many characters. */
export const MAX_SOURCE_LENGTH = 64;
export const sourceSchema = z.string().trim().min(1).max(MAX_SOURCE_LENGTH, `source is at most ${MAX_SOURCE_LENGTH} characters`);

/** repo/project/branch drive recall boosts; clients add other string keys (working_dir, …), kept as sent. */
export const MAX_PROJECT_CONTEXT_KEYS = 32;
/** A project_context key, in characters (code points). */
export const MAX_PROJECT_CONTEXT_KEY_CHARS = 100;
/** A project_context value (repo, project and branch: 300). */
export const MAX_PROJECT_CONTEXT_VALUE_CHARS = 1000;
export const projectContextSchema = z
  .object({
    repo: z.string().max(300).optional(),
    project: z.string().max(300).optional(),
    branch: z.string().max(300).optional(),
  })
  .catchall(z.string().max(MAX_PROJECT_CONTEXT_VALUE_CHARS, `project_context values are at most ${MAX_PROJECT_CONTEXT_VALUE_CHARS} characters`))
  .refine((context) => Object.keys(context).length <= MAX_PROJECT_CONTEXT_KEYS, `project_context has at most ${MAX_PROJECT_CONTEXT_KEYS} keys`)
  // Characters (code points), as the propertyNames maxLength below counts them: .length counted a key of emoji twice.
  .refine(
    (context) => Object.keys(context).every((key) => key.length <= MAX_PROJECT_CONTEXT_KEY_CHARS || (key.length <= 2 * MAX_PROJECT_CONTEXT_KEY_CHARS && [...key].length <= MAX_PROJECT_CONTEXT_KEY_CHARS)),
    `project_context keys are at most ${MAX_PROJECT_CONTEXT_KEY_CHARS} characters`,
  )
  // The refinements above, as JSON Schema (the OpenAPI document, MCP's tools/list) can state them.
  .meta({ maxProperties: MAX_PROJECT_CONTEXT_KEYS, propertyNames: { maxLength: MAX_PROJECT_CONTEXT_KEY_CHARS } });

/**
 * The unique index on (hub, source_path) holds at most about 2.7 kB per entry: a path within the
 * characters but past the bytes (1,024 Chinese characters are 3 kB of UTF-8) failed there, a 500.
 */
export const MAX_SOURCE_PATH_LENGTH = 1024;
export const MAX_SOURCE_PATH_BYTES = 2048;
// Characters (code points), as the listed maxLength counts them: .length counted an emoji twice.
export const sourcePathTooLong = (path: string) =>
  (path.length > MAX_SOURCE_PATH_LENGTH && [...path].length > MAX_SOURCE_PATH_LENGTH) || Buffer.byteLength(path, "utf8") > MAX_SOURCE_PATH_BYTES;
const sourcePathSchema = z
  .string()
  .trim()
  .min(1)
  .refine((path) => !sourcePathTooLong(path), `source_path is at most ${MAX_SOURCE_PATH_LENGTH} characters and ${MAX_SOURCE_PATH_BYTES} bytes of UTF-8`)
  .refine((path) => !path.includes("\0"), "source_path must not contain NUL")
  .meta({ maxLength: MAX_SOURCE_PATH_LENGTH });

export const fileRefSchema = z.object({
  object_key: z.string().min(1).max(500),
  filename: uploadFilenameSchema,
  content_type: z.string().min(1).max(100),
  size_bytes: z.int().min(0).optional(),
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, "sha256 must be 64 hex digits").optional(),
});

export const createMemoryBodySchema = z.object({
  // May be empty or absent when file_ref carries the body (see refine below).
  content: z.string().default(""),
  title: titleSchema.optional(),
  hint: z.string().max(MAX_HINT_CHARS).optional(),
  kind: z.enum(KINDS).optional(),
  stability: z.enum(STABILITIES).optional(),
  tags: tagsSchema.optional(),
  content_type: z.enum(CONTENT_TYPES).optional(),
  source: sourceSchema.optional(),
  source_agent: shortText(MAX_AGENT_NAME_CHARS).optional(),
  assisted_by_agent: shortText(MAX_AGENT_NAME_CHARS).optional(),
  initiation_type: z.enum(INITIATION_TYPES).optional(),
  source_path: sourcePathSchema.optional(),
  hub_reason: z.string().max(MAX_HUB_REASON_CHARS).optional(),
  project_context: projectContextSchema.optional(),
  file_ref: fileRefSchema.optional(),
  created_at: timestampSchema("created_at must be an RFC 3339 timestamp").optional(),
  // White space alone is as empty as "": it made a memory of nothing, titled "Untitled".
}).refine((body) => body.content.trim().length > 0 || body.file_ref !== undefined, {
  message: "content must not be empty (unless file_ref names the file)",
  path: ["content"],
})
  // "file" is what a memory made from an upload is; the label alone left a memory that claims a file
  // it has none of (no attachment, nothing to extract or download).
  .refine((body) => body.content_type !== "file" || body.file_ref !== undefined, {
    message: 'content_type "file" needs a file_ref (from POST /v1/uploads); omit content_type for text',
    path: ["content_type"],
  })
  // The refine above, as the OpenAPI document can state it.
  .meta({ anyOf: [{ required: ["content"], properties: { content: { minLength: 1 } } }, { required: ["file_ref"] }] });
export type CreateMemoryBody = z.output<typeof createMemoryBodySchema>;

const updateMemoryFields = z.object({
    title: titleSchema.optional(),
    content: z.string().min(1, "content must not be empty").refine((content) => content.trim().length > 0, "content must not be empty").optional(),
    content_type: z.enum(CONTENT_TYPES).optional(),
    kind: z.enum(KINDS).optional(),
    stability: z.enum(STABILITIES).optional(),
    tags: tagsSchema.optional(),
    // "" and null take the hint back: read as absent, a wrong hint could never be removed and went on
    // steering every reclassification of the memory.
    hint: z
      .union([z.string().max(MAX_HINT_CHARS), z.null()])
      .transform((hint) => (hint?.trim() ? hint : null))
      .meta({ keepEmpty: true })
      .optional(),
    state: z.enum(["active", "archived"]).optional(),
});
const updatableFields = Object.keys(updateMemoryFields.shape) as (keyof typeof updateMemoryFields.shape)[];
export const updateMemoryBodySchema = atLeastOneOf(updateMemoryFields, updatableFields, {
  message: `provide at least one of ${updatableFields.join(", ")}`,
});
export type UpdateMemoryBody = z.output<typeof updateMemoryBodySchema>;

const timestampOf = (name: string) => timestampSchema(`${name} must be an RFC 3339 timestamp`);

export const listMemoriesQuerySchema = z.object({
  limit: z.string().optional(),
  cursor: cursorSchema.optional(),
  sort: z.enum(["newest", "relevant"]).default("newest"),
  hub_id: z.string().overwrite(normalizeId).optional(),
  // Refused when malformed, as actor is and recall's topic_id: an empty page hid a client's typo.
  topic_id: uuidField("topic_id must be a topic id").optional(),
  kind: z.enum(KINDS).optional(),
  created_after: timestampOf("created_after").optional(),
  created_before: timestampOf("created_before").optional(),
  /** The pusher's user id. */
  actor: uuidField("actor must be a user id").optional(),
});
export type ListMemoriesQuery = z.output<typeof listMemoriesQuerySchema>;

// Lowercased here, once: the database answers an UPPERCASE uuid (as GET /v1/memories/{id} accepts
// it) with its lowercase id, and the batch's reply matches what it found against what was asked.
const idSchema = z.string().min(1).max(100).toLowerCase();
const idsSchema = z
  .array(idSchema)
  .min(1, "ids must name at least one memory")
  .max(MAX_BATCH_IDS, `at most ${MAX_BATCH_IDS} ids per batch`);

export const batchDeleteBodySchema = z.object({ ids: idsSchema });

// null names no target, as absent does: `topic_id: null` beside a hub_id is how a client that writes every
// field (a Go struct, a form) says "no topic", and it was refused with 400.
const targetIdSchema = idSchema.nullish().transform((id) => id ?? undefined);

export const batchMoveBodySchema = z
  .object({ ids: idsSchema, hub_id: targetIdSchema, topic_id: targetIdSchema })
  .refine((body) => body.hub_id !== undefined || body.topic_id !== undefined, {
    message: "provide hub_id, topic_id or both",
    path: ["hub_id"],
  });

import { z } from "zod";

/**
 * The Memory object of the API as zod: serializeMemory is typed by it (so the two cannot drift) and
 * the OpenAPI document (lib/openapi) publishes it as the response schema.
 */
export const memoryObjectSchema = z
  .object({
    id: z.string(),
    hub_id: z.string(),
    owner_id: z.string(),
    title: z.string(),
    content_type: z.string().meta({ description: "text, markdown, code, chat, transcript, file, structured or link" }),
    content_hash: z.string(),
    summary: z.string(),
    tags: z.array(z.string()),
    hint: z.string().nullable().meta({ description: "the pusher's note on what the memory is for" }),
    kind: z.string().meta({ description: "episodic, semantic, procedural or rationale" }),
    stability: z.string().meta({ description: "volatile, evolving or stable" }),
    boundary: z.string(),
    state: z.string().meta({ description: "active, processing or archived" }),
    // Memax's fields for features Engram does not have: every memory weighs the same in recall and none is pinned.
    pinned: z.boolean().meta({ description: "always false: Engram has no pinned memories" }),
    retrieval_weight: z.number().meta({ description: "always 1: recall weighs every memory alike" }),
    source: z.string(),
    source_agent: z.string().nullable(),
    assisted_by_agent: z.string().nullable(),
    initiation_type: z.string().nullable(),
    source_path: z.string().nullable(),
    hub_reason: z.string().nullable(),
    project_context: z.record(z.string(), z.string()).nullable().meta({ description: "repo, project, branch and other string keys the client sent" }),
    topic_id: z.string().nullable(),
    version: z.int(),
    access_count: z.int(),
    accessed_at: z.string().meta({ description: "when it was last read (get or recall); its creation time until then" }),
    processing_status: z.string().meta({ description: "pending, processing, done or failed" }),
    processing_error: z.string().nullable(),
    processed_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: "Memory" });
export type MemoryObject = z.output<typeof memoryObjectSchema>;

/** The original file of a file memory (Memax's MemoryAttachment). */
export const attachmentObjectSchema = z
  .object({
    id: z.string(),
    memory_id: z.string(),
    owner_id: z.string(),
    kind: z.literal("original"),
    filename: z.string(),
    content_type: z.string(),
    size_bytes: z.int(),
    sha256: z.string().nullable(),
    width: z.int().nullable(),
    height: z.int().nullable(),
    inline_eligible: z.boolean(),
    created_at: z.string(),
  })
  .meta({ id: "Attachment" });
export type AttachmentObject = z.output<typeof attachmentObjectSchema>;

/** GET /v1/memories/{id}: the memory with its content and attachments. */
export const memoryWithContentSchema = memoryObjectSchema
  .extend({ content: z.string(), attachments: z.array(attachmentObjectSchema) })
  .meta({ id: "MemoryWithContent" });
export type MemoryWithContent = z.output<typeof memoryWithContentSchema>;

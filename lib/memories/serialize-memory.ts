import type { Attachment, Memory } from "@/lib/db/generated/client.ts";
import type { AttachmentObject, MemoryObject, MemoryWithContent } from "./memory-object.ts";

/**
 * A memory row with what its API object shows (a whole row is one too): what the memory list and a GET
 * read (lib/memories/memory-object-rows.ts), file_ref, processing and extraction bookkeeping and the lock
 * flags left out, since mapping every column of every row cost the server CPU (issue 16).
 */
export type MemoryObjectRow = Pick<
  Memory,
  | "id"
  | "hubId"
  | "ownerId"
  | "title"
  | "contentType"
  | "contentHash"
  | "summary"
  | "tags"
  | "hint"
  | "kind"
  | "stability"
  | "boundary"
  | "state"
  | "source"
  | "sourceAgent"
  | "assistedByAgent"
  | "initiationType"
  | "sourcePath"
  | "hubReason"
  | "projectContext"
  | "topicId"
  | "version"
  | "accessCount"
  | "lastAccessedAt"
  | "processingStatus"
  | "processingError"
  | "processedAt"
  | "createdAt"
  | "updatedAt"
>;

/** An attachment row with what serializeAttachment shows. */
export type AttachmentObjectRow = Pick<Attachment, "id" | "memoryId" | "filename" | "contentType" | "sizeBytes" | "sha256" | "width" | "height" | "createdAt">;

/** The Memory object of the API (create, list); `withContent` adds content and attachments (get, patch). */
export function serializeMemory(memory: MemoryObjectRow): MemoryObject {
  return {
    id: memory.id,
    hub_id: memory.hubId,
    owner_id: memory.ownerId,
    title: memory.title,
    content_type: memory.contentType,
    content_hash: memory.contentHash,
    summary: memory.summary,
    tags: memory.tags,
    hint: memory.hint,
    kind: memory.kind,
    stability: memory.stability,
    boundary: memory.boundary,
    state: memory.state,
    pinned: false,
    retrieval_weight: 1,
    source: memory.source,
    source_agent: memory.sourceAgent,
    assisted_by_agent: memory.assistedByAgent,
    initiation_type: memory.initiationType,
    source_path: memory.sourcePath,
    hub_reason: memory.hubReason,
    project_context: memory.projectContext as Record<string, string> | null,
    topic_id: memory.topicId,
    version: memory.version,
    access_count: memory.accessCount,
    accessed_at: (memory.lastAccessedAt ?? memory.createdAt).toISOString(),
    processing_status: memory.processingStatus,
    processing_error: memory.processingError,
    processed_at: memory.processedAt?.toISOString() ?? null,
    created_at: memory.createdAt.toISOString(),
    updated_at: memory.updatedAt.toISOString(),
  };
}

export type { MemoryObject };

export function serializeMemoryWithContent(memory: MemoryObjectRow & { content: string; attachments: AttachmentObjectRow[] }): MemoryWithContent {
  return {
    ...serializeMemory(memory),
    content: memory.content,
    attachments: memory.attachments.map((a) => serializeAttachment(a, memory.ownerId)),
  };
}

/** Memax's MemoryAttachment: the original file of a file memory. */
export function serializeAttachment(a: AttachmentObjectRow, ownerId: string): AttachmentObject {
  return {
    id: a.id,
    memory_id: a.memoryId,
    owner_id: ownerId,
    kind: "original" as const,
    filename: a.filename,
    content_type: a.contentType,
    size_bytes: a.sizeBytes,
    sha256: a.sha256,
    width: a.width,
    height: a.height,
    // Raster images only: SVG or HTML must never render inline from a signed URL.
    inline_eligible: ["image/png", "image/jpeg", "image/gif", "image/webp"].includes(a.contentType),
    created_at: a.createdAt.toISOString(),
  };
}

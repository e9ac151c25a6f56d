import type { Prisma } from "@/lib/db/generated/client.ts";
import type { AttachmentObject, MemoryObject, MemoryWithContent } from "./memory-object.ts";

/**
 * The columns serializeMemory shows, for reads that only answer with them (the memory list, a GET):
 * Prisma spends CPU on every column of every row it reads, and a list page of 20 memories read whole
 * (file_ref, processing and extraction bookkeeping, the lock flags) cost about 0.25 ms more per
 * request than these (issue 16).
 */
export const MEMORY_OBJECT_SELECT = {
  id: true,
  hubId: true,
  ownerId: true,
  title: true,
  contentType: true,
  contentHash: true,
  summary: true,
  tags: true,
  hint: true,
  kind: true,
  stability: true,
  boundary: true,
  state: true,
  source: true,
  sourceAgent: true,
  assistedByAgent: true,
  initiationType: true,
  sourcePath: true,
  hubReason: true,
  projectContext: true,
  topicId: true,
  version: true,
  accessCount: true,
  lastAccessedAt: true,
  processingStatus: true,
  processingError: true,
  processedAt: true,
  createdAt: true,
  updatedAt: true,
} as const satisfies Prisma.MemorySelect;

/** A memory row with what its API object shows (a whole row is one too). */
export type MemoryObjectRow = Prisma.MemoryGetPayload<{ select: typeof MEMORY_OBJECT_SELECT }>;

/** The columns serializeAttachment shows. */
export const ATTACHMENT_OBJECT_SELECT = {
  id: true,
  memoryId: true,
  filename: true,
  contentType: true,
  sizeBytes: true,
  sha256: true,
  width: true,
  height: true,
  createdAt: true,
} as const satisfies Prisma.AttachmentSelect;

export type AttachmentObjectRow = Prisma.AttachmentGetPayload<{ select: typeof ATTACHMENT_OBJECT_SELECT }>;

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

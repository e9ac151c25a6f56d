import { z } from "zod";
import { uuidField } from "@/lib/ids.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { needsExtraction } from "@/lib/extraction/extract-memory-text.ts";
import { allows, forbiddenFor, membershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { createMemory, isBareUrl, type CreateMemoryResult } from "./create-memory.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import { SOURCES, type CreateMemoryBody, type Kind, type Stability } from "./memory-fields.ts";

export const shareMemoryBodySchema = z.object({
  target_hub_id: uuidField("target_hub_id must be a hub id (not a slug)"),
});
export type ShareMemoryBody = z.output<typeof shareMemoryBodySchema>;

/**
 * POST /v1/memories/{id}/share: copies a memory the caller can read into another hub they can write
 * to, as a new memory of theirs that the pipeline processes there; the original stays where it is.
 * The copy is the memory as it reads now (title, text, kind, stability, tags, provenance). A file or
 * link becomes its extracted text: the file's bytes stay with the original, and nothing is fetched
 * again. Sharing the same text twice returns the first copy (the target hub's content dedup).
 */
export async function shareMemory(ctx: AuthContext, id: string, input: ShareMemoryBody): Promise<CreateMemoryResult> {
  const { memory } = await findMemoryOrThrow(ctx, id);
  if (memory.hubId === input.target_hub_id) {
    throw new ApiError("invalid_request", "The memory is already in that hub", { issues: [{ path: "target_hub_id", message: "the memory's own hub" }] });
  }
  const target = await membershipOrThrow(ctx, input.target_hub_id);
  if (!allows(target, "memories.write")) throw forbiddenFor(target, "add memories");
  const fetched = memory.contentType === "file" || memory.contentType === "link";
  // What the pipeline will still read (needsExtraction), not the label alone: a memory merely labelled
  // "file" (create and PATCH accept the label without an upload) is never read, so it was refused for good.
  if (needsExtraction(memory)) {
    throw new ApiError("conflict", "This memory's file or page is still being read; share it once it is processed", { processing_status: memory.processingStatus });
  }
  const source = (SOURCES as readonly string[]).includes(memory.source) ? (memory.source as CreateMemoryBody["source"]) : undefined;
  // Built, not parsed: the stored values passed validation when they were written (or came from
  // the pipeline), and a rule tightened since must not turn a share into a 500.
  const body: CreateMemoryBody = {
    content: memory.content,
    title: memory.title,
    kind: memory.kind as Kind,
    stability: memory.stability as Stability,
    tags: memory.tags,
    // Extracted text is whatever the file or page was; let the text say what it is. A page that could
    // not be read left its URL as the text, which alone would make the copy a link fetched again.
    content_type: fetched ? (isBareUrl(memory.content) ? "text" : undefined) : (memory.contentType as CreateMemoryBody["content_type"]),
    source,
    source_agent: memory.sourceAgent ?? undefined,
    assisted_by_agent: memory.assistedByAgent ?? undefined,
    initiation_type: (memory.initiationType ?? undefined) as CreateMemoryBody["initiation_type"],
  };
  return createMemory({ ...ctx, hub: target.hub, role: target.role }, body);
}

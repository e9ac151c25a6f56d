import type { AuthContext } from "@/lib/api/context.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { withShownTopics } from "@/lib/topics/topics-being-deleted.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { isUuid } from "@/lib/ids.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canEditMemory } from "@/lib/api/permissions.ts";
import { classifyKind, classifyStability } from "@/lib/processing/classify-heuristic.ts";
import { afterMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { assertStorageQuota } from "@/lib/quotas/assert-storage-quota.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { assertContentSize, contentHash, isBareUrl, linkUrlOrThrow } from "./create-memory.ts";
import { deriveTitle } from "./derive-title.ts";
import { findMemoryOrThrow } from "./find-memory.ts";
import { memoryWriteGuard } from "./memory-write-guard.ts";
import { sourcePathTooLong, type UpdateMemoryBody } from "./memory-fields.ts";
import { serializeMemoryWithContent } from "./serialize-memory.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { chunkGlosses, retitleChunks } from "@/lib/recall/store-chunks.ts";

const ATTEMPTS = 5;

/**
 * Partial update; a content change bumps the version, re-hashes and re-processes. The write is one
 * conditional statement (issue 18 #7): it re-checks the caller's permission and that the row is the
 * one read (updated_at), so a concurrent role change cannot be bypassed and a concurrent edit is not
 * silently overwritten; either makes it look again.
 */
export async function updateMemory(ctx: AuthContext, id: string, input: UpdateMemoryBody) {
  if (input.content !== undefined) assertContentSize(input.content);
  // A new title is written into the chunks' lexical entries in the update's transaction (retitleChunks);
  // their Chinese words' glosses are worked out by the first attempt, after its access check and
  // outside any transaction (the first Chinese text a process meets loads the dictionary).
  const glosses: { byText?: Map<string, string> } = {};
  for (let attempt = 1; ; attempt++) {
    // First without a lock. When a concurrent write got in between the read and the write, again under
    // the memory's row lock, which holds other writers off until this one commits: retried without it,
    // ten edits of one memory at once left 14 of 30 out of attempts (409) on PostgreSQL.
    const updated =
      attempt === 1
        ? await tryUpdate(ctx, id, input, glosses)
        : await ctx.db.$transaction(async (tx) => {
            await lockMemoryRows(tx, [id].filter(isUuid), (await readableHubs({ ...ctx, db: tx })).map((m) => m.hub.id));
            return tryUpdate(ctx, id, input, glosses, tx);
          });
    if (updated) {
      afterMemoryWrite(updated);
      // The full memory, as GET answers it (Memax's update() reads content from it).
      const [attachments, [shown]] = await Promise.all([
        ctx.db.attachment.findMany({ where: { memoryId: updated.id }, orderBy: { createdAt: "asc" } }),
        // As GET shows it: no topic while its topic is being deleted.
        withShownTopics(ctx.sql, [updated]),
      ]);
      return serializeMemoryWithContent({ ...shown!, attachments });
    }
    if (attempt >= ATTEMPTS) throw new ApiError("conflict", "The memory kept changing while this update was applied; try again");
  }
}

/** One read and conditional write; `tx`: inside the caller's transaction (which holds the row lock). */
async function tryUpdate(ctx: AuthContext, id: string, input: UpdateMemoryBody, glosses: { byText?: Map<string, string> }, tx?: DbClient) {
  const db = tx ?? ctx.db;
  // The stored text (up to 3 MiB) is read only when the edit works on it: a new hint or content type
  // reclassifies it, and a memory becoming a link must hold a URL. New content replaces it unread.
  const { memory, role } = await findMemoryOrThrow({ ...ctx, db }, id, { content: false });
  if (!canEditMemory(role, memory.ownerId === ctx.user.id)) {
    throw new ApiError("forbidden", `Your role (${role}) does not allow editing this memory`);
  }
  if (input.state !== undefined && memory.state === "processing") {
    throw new ApiError("conflict", "The memory is still processing; its state can change once it is active");
  }
  // As on create: "file" names an upload, and a memory without one would claim a file it has none of.
  if (input.content_type === "file" && memory.fileRef === null) {
    throw new ApiError("invalid_request", 'content_type "file" is only for a memory made from an upload', {
      issues: [{ path: "content_type", message: "this memory has no uploaded file" }],
    });
  }
  // And the other way: the extract step reads a memory's file whenever it has one, so a file memory made a
  // link kept its file's text under a link's type and its page was never fetched.
  if (input.content_type === "link" && memory.fileRef !== null && memory.contentType !== "link") {
    throw new ApiError("invalid_request", 'A memory made from an upload cannot become a link; push the link as a memory of its own', {
      issues: [{ path: "content_type", message: "this memory has an uploaded file" }],
    });
  }
  const contentType = input.content_type ?? memory.contentType;
  const becomesLink = contentType === "link" && memory.contentType !== "link";
  const needsStoredText = input.content === undefined && (input.hint !== undefined || input.content_type !== undefined);
  // Read after the row: a write in between moves updated_at, and the conditional write below then retries.
  const stored = needsStoredText ? await db.memory.findUnique({ where: { id: memory.id }, select: { content: true } }) : null;
  if (needsStoredText && !stored) throw new ApiError("not_found", "Memory not found");
  // A link given a URL (becoming a link, new content that is a URL, or new content for a link that still
  // holds its URL: not read yet, or its page could not be read) is what a push of that URL is: one
  // http(s) URL, without its #fragment, fetched again. A link whose page was read holds the page's text,
  // which other text may replace.
  const givesUrl =
    contentType === "link" &&
    (becomesLink ||
      (input.content !== undefined && (isBareUrl(input.content) || memory.extractedAt === null || (await holdsUrl(db, memory.id)))));
  const content = givesUrl ? linkUrlOrThrow(input.content ?? stored?.content ?? "") : (input.content ?? stored?.content ?? "");
  const hash = input.content !== undefined || givesUrl ? contentHash(content) : memory.contentHash;
  const contentChanged = hash !== memory.contentHash;
  // Fetched as a pushed link is (a new version, `processing` until its page is read): without that the
  // pipeline never fetched it, and share refused it as still being read.
  const refetch = givesUrl && (contentChanged || becomesLink);
  const reprocess = contentChanged || refetch;
  // A push makes a link its own source_path: so here, unless the memory has another one it was given.
  const ownPath = memory.sourcePath === null || (memory.contentType === "link" && contentHash(memory.sourcePath) === memory.contentHash);
  const sourcePath = refetch && ownPath && !sourcePathTooLong(content) ? content : memory.sourcePath;
  const title = input.title ?? (memory.titleDerived && contentChanged ? deriveTitle(content) : memory.title);
  // Every chunk's lexical entry carries the title (store-chunks.ts): without rewriting them, a processed
  // memory was never found by its new title. A new version's chunks are written anew anyway.
  const retitle = !reprocess && title !== memory.title;
  // Worked out by the first attempt, outside any transaction. A retry under the row lock that re-titles
  // when the first attempt did not (rare) leaves them to retitleChunks, which glosses every chunk text
  // missing from them there.
  if (retitle && !tx) glosses.byText ??= await chunkGlosses(db, memory.id);
  const hint = input.hint !== undefined ? input.hint : memory.hint;
  const reclassify = contentChanged || input.hint !== undefined || input.content_type !== undefined;
  const kindLocked = memory.kindLocked || input.kind !== undefined;
  const stabilityLocked = memory.stabilityLocked || input.stability !== undefined;
  const kind = input.kind ?? (reclassify && !kindLocked ? classifyKind(content, contentType, hint) : memory.kind);
  const stability =
    input.stability ?? (reclassify && !stabilityLocked ? classifyStability(content, kind, contentType, hint) : memory.stability);

  const state = refetch && (input.state ?? memory.state) !== "archived" ? "processing" : (input.state ?? memory.state);
  const growth = contentChanged ? Buffer.byteLength(content, "utf8") - (await storedBytes(db, memory.id)) : 0;
  // Growing content is checked against the owner's and the hub's storage quota in the write's transaction.
  const write = async (db: DbClient) => {
    const rows = await db.memory.updateManyAndReturn({
      where: { id: memory.id, hubId: memory.hubId, updatedAt: memory.updatedAt, ...memoryWriteGuard(ctx.user.id, "edit") },
      data: {
        // Title and text only when they change: either one named in the UPDATE (even unchanged) rebuilds
        // the search vector from the whole text (memories_search_vector_trg), and the text written back
        // is a new out-of-line (TOAST) copy of it: megabytes written for a tag edit.
        ...(title !== memory.title && { title }),
        // Only what this edit names or changes: the pipeline's writes (a link's state once its page is
        // read, the kind and stability it guessed) keep updated_at, so the check above does not see them,
        // and a field written back as this edit read it would undo them. A field the request names is
        // written even when it looks unchanged: a guess landing since the read would otherwise stay,
        // and with the lock this edit sets, for good.
        ...(input.title !== undefined && { titleDerived: false }),
        ...(contentChanged && { content, contentHash: hash }),
        ...((input.content_type !== undefined || contentType !== memory.contentType) && { contentType }),
        ...(input.tags !== undefined && { tags: input.tags }),
        ...((input.hint !== undefined || hint !== memory.hint) && { hint }),
        ...((input.kind !== undefined || kind !== memory.kind) && { kind }),
        ...(kindLocked !== memory.kindLocked && { kindLocked }),
        ...((input.stability !== undefined || stability !== memory.stability) && { stability }),
        ...(stabilityLocked !== memory.stabilityLocked && { stabilityLocked }),
        ...((input.state !== undefined || state !== memory.state) && { state }),
        // superseded_by says why a memory is archived (a dream merged it, or a review kept the other):
        // one back in use is superseded by nothing, as the undo and a new push leave it. Kept, it named
        // the memory it was merged into for as long as it stayed active.
        ...(state !== "archived" && memory.supersededBy !== null && { supersededBy: null }),
        ...(refetch && { extractedAt: null, extractionError: null }),
        // A link waiting to read its page again keeps the page meanwhile and the URL in link_url: content
        // this edit gives replaces both (kept, the URL lingered, uncounted, and a later read took it up).
        ...(reprocess && memory.linkUrl !== null && { linkUrl: null }),
        ...(sourcePath !== memory.sourcePath && { sourcePath }),
        // The old version's summary may quote what the edit took out; the summarise step writes the new one.
        ...(reprocess && { version: { increment: 1 }, processingStatus: "pending", processingAttempts: 0, processingError: null, summary: "" }),
        // The database makes it strictly later than the row's (memories_updated_at_forward), so the
        // updated_at check above tells two writes apart even within one millisecond.
        updatedAt: ctx.now(),
      },
    });
    if (rows.length && retitle) await retitleChunks(db, memory.id, glosses.byText ?? new Map());
    if (rows.length) await emitEvent(db, { type: "memory.updated", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id });
    return rows;
  };
  const writeChecked = async (db: DbClient) => {
    const rows = await write(db);
    // After the write, whose trigger added the growth to the counters (see assertStorageQuota).
    if (rows.length && growth > 0) await assertStorageQuota(db, { ownerId: memory.ownerId, hubId: memory.hubId, bytes: growth, memories: 0 });
    return rows;
  };
  try {
    const [updated] = tx ? await writeChecked(tx) : await ctx.db.$transaction((own) => writeChecked(own));
    return updated;
  } catch (error) {
    // Another memory of the hub is this URL's link (its source_path): a push of the URL updates that one.
    if (sourcePath !== memory.sourcePath && isUniqueViolation(error)) {
      throw new ApiError("conflict", "Another memory in this hub is the link to this URL; update that one instead", { source_path: sourcePath });
    }
    throw error;
  }
}

/** Whether a link's stored text is still its URL (its page not read in), asked of the database, unread. */
async function holdsUrl(db: DbClient, id: string): Promise<boolean> {
  const [row] = await db.$queryRaw<{ url: boolean }[]>`
    SELECT content ~* '^\\s*https?://\\S+\\s*$' AS url FROM memories WHERE id = ${id}::uuid`;
  return row?.url ?? false;
}

/** The stored text's size in bytes, counted by the database instead of reading the text. */
async function storedBytes(db: DbClient, id: string): Promise<number> {
  const [row] = await db.$queryRaw<{ n: number }[]>`SELECT octet_length(content)::int AS n FROM memories WHERE id = ${id}::uuid`;
  return row?.n ?? 0;
}

import { withShownTopics } from "@/lib/topics/topics-being-deleted.ts";
import { createHash } from "node:crypto";
import type { HubContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { canEditMemory, type Role } from "@/lib/api/permissions.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import type { DbClient } from "@/lib/db/database.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { hubMembersLockKey, lockedRoleOrThrow, lockMembershipOrThrow } from "@/lib/hubs/hub-access.ts";
import { Prisma, type Memory } from "@/lib/db/generated/client.ts";
import { newId } from "@/lib/ids.ts";
import { classifyKind, classifyStability } from "@/lib/processing/classify-heuristic.ts";
import { inferContentType } from "@/lib/processing/infer-content-type.ts";
import { afterMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { assertStorageQuota, checkStorageQuota, storageQuotaPast, storageQuotaRead, type StorageQuotaRow } from "@/lib/quotas/assert-storage-quota.ts";
import { resolveFileRef, type VerifiedFile } from "@/lib/uploads/resolve-file-ref.ts";
import { detachUploads, removeBlobs } from "@/lib/uploads/sweep-uploads.ts";
import { ATTACHABLE_FOR_MS } from "@/lib/uploads/upload-limits.ts";
import { chunkGlosses, retitleChunks } from "@/lib/recall/store-chunks.ts";
import { deriveTitle } from "./derive-title.ts";
import { CAPTURE_SOURCE, extractCaptureFacts } from "./extract-capture-facts.ts";
import { DECISION_GATE_PATH_PREFIX, MAX_CONTENT_BYTES, MAX_SOURCE_PATH_BYTES, MAX_SOURCE_PATH_LENGTH, sourcePathTooLong, type CreateMemoryBody } from "./memory-fields.ts";
import { serializeMemory, type MemoryObject } from "./serialize-memory.ts";
import { emitEvent, emitEventAfterRead } from "@/lib/events/emit-event.ts";

export interface CreateMemoryResult {
  memory: MemoryObject;
  /** false when an existing memory was returned (same content) or updated (same source_path). */
  created: boolean;
  /** Input that was ignored or coerced rather than refused: REST sends them as X-Engram-Warning. */
  warnings: string[];
}

export function contentHash(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

/**
 * The advisory lock that serialises everything which puts a memory at this source_path in this hub
 * (a push, a batch-move into the hub), so each sees the other's row rather than breaking the unique index.
 */
export const sourcePathLockKey = (hubId: string, sourcePath: string) => `memory:${hubId}:path:${sourcePath}`;

/** Likewise for a content hash: a push and a batch-move into the hub each see the other's memory with this content. */
export const contentHashLockKey = (hubId: string, hash: string) => `memory:${hubId}:${hash}`;

export function assertContentSize(content: string): void {
  const bytes = Buffer.byteLength(content, "utf8");
  if (bytes > MAX_CONTENT_BYTES) {
    throw new ApiError("body_too_large", `content is ${bytes} bytes; the limit is ${MAX_CONTENT_BYTES}`, { max_bytes: MAX_CONTENT_BYTES });
  }
}

/**
 * Stores a memory in the context's hub. Re-pushing the same source_path
 * updates that memory in place (version +1 when the content changed);
 * re-pushing identical content returns the existing memory untouched.
 */
export interface CreateMemoryOptions {
  /** A decision gate's answer, the one writer of its `decision-gates/` source_path. */
  gateAnswer?: boolean;
  /**
   * Runs in the write's transaction once the source_path and the membership are locked, before
   * anything is written: a throw writes nothing (a gate's answer checks there that its claim stands).
   */
  underLock?: (tx: DbClient) => Promise<void>;
  /**
   * Runs in the memory's transaction, after its write: a caller that must record the save (a chat
   * tool call) commits the record with it or neither, so a retry cannot save a second time.
   */
  inTransaction?: (tx: DbClient, memory: Memory) => Promise<void>;
}

export async function createMemory(ctx: HubContext, input: CreateMemoryBody, options: CreateMemoryOptions = {}): Promise<CreateMemoryResult> {
  assertContentSize(input.content);
  if (input.source_path?.startsWith(DECISION_GATE_PATH_PREFIX) && !options.gateAnswer) {
    throw new ApiError("invalid_request", `source_path may not start with "${DECISION_GATE_PATH_PREFIX}": that prefix is reserved for the answers of decision gates`, {
      issues: [{ path: "source_path", message: `"${DECISION_GATE_PATH_PREFIX}" is reserved` }],
    });
  }
  const source = input.source ?? "api";
  if (input.created_at && source !== "import") {
    throw new ApiError("invalid_request", 'created_at is only accepted with source "import"', {
      issues: [{ path: "created_at", message: 'only accepted with source "import"' }],
    });
  }
  const now = ctx.now();
  const createdAt = input.created_at ? new Date(input.created_at) : now;
  if (createdAt.getTime() > now.getTime() + 5 * 60_000) {
    throw new ApiError("invalid_request", "created_at must not be in the future", { issues: [{ path: "created_at", message: "in the future" }] });
  }
  // Ids are time-ordered from created_at (UUID v7), which starts at the Unix epoch.
  if (createdAt.getTime() < 0) {
    throw new ApiError("invalid_request", "created_at must not be before 1970-01-01", { issues: [{ path: "created_at", message: "before 1970" }] });
  }
  const warnings: string[] = [];
  // Memax's CLI labels any one-line push that starts with http(s):// a link, notes after the URL included;
  // a link is one URL, so such a push keeps its text as a note instead of being refused.
  if (input.content_type === "link" && !input.file_ref && /^https?:\/\/\S+\s/i.test(input.content.trim())) {
    warnings.push('content_type "link" ignored: the content is a URL with more text after it, so it is kept as text');
    input = { ...input, content_type: undefined };
  }
  // A key issued for an agent pushes as that agent, whatever the body claims.
  const agent = ctx.credential.agentName;
  if (agent) {
    if (input.source_agent && input.source_agent !== agent) warnings.push(`source_agent ignored: this API key pushes as "${agent}"`);
    input = { ...input, source_agent: agent };
  }
  // Files and links start in `processing`; the pipeline's extract step reads them.
  const file = input.file_ref ? await resolveFileRef(ctx, input.file_ref) : null;
  const link = file ? null : linkTarget(input);
  // A link is its own source_path unless it names one, and then must fit one (the index's bounds).
  if (link && input.source_path === undefined && sourcePathTooLong(link)) {
    const message = `too long to be its own source_path (at most ${MAX_SOURCE_PATH_LENGTH} characters and ${MAX_SOURCE_PATH_BYTES} bytes); send a source_path with it`;
    throw new ApiError("invalid_request", `This link is ${message}`, { issues: [{ path: "content", message }] });
  }
  if (link) input = { ...input, content: link, content_type: "link", source_path: input.source_path ?? link };
  const hash = file ? contentHash(`file:${file.sha256}
${input.content}`) : contentHash(input.content);
  const glosses = file || link ? undefined : await retitleGlosses(ctx, input, hash);
  const write = async (tx: DbClient): Promise<{ memory: Memory; created: boolean; replaced: string[] }> => {
    // The source_path's lock (if any) before the content's: a push with a path and one without can
    // share a content hash, and each must see the other's memory (always in this order, no deadlock).
    // Then the membership (shared, as lockMembershipOrThrow takes it), all in one statement.
    await lockForTransaction(tx, [
      ...(input.source_path ? [sourcePathLockKey(ctx.hub.id, input.source_path)] : []),
      contentHashLockKey(ctx.hub.id, hash),
      { shared: hubMembersLockKey(ctx.hub.id) },
    ]);
    let role: Role;
    let targets: PushTargets;
    if (options.underLock) {
      // A gate's answer checks its claim between the membership and the reads at its path, which it may change.
      ({ role } = await lockMembershipOrThrow(tx, ctx, ctx.hub, "memories.write", "add memories", { locked: true }));
      await options.underLock(tx);
      targets = await pushTargets(tx, ctx, input.source_path, hash);
    } else {
      targets = await pushTargets(tx, ctx, input.source_path, hash);
      ({ role } = lockedRoleOrThrow(ctx, ctx.hub, targets.role, "memories.write", "add memories"));
    }
    if (input.source_path) {
      // Read under the memory's row lock: an update in place writes every field from this read, so an
      // edit (PATCH) committed between an unlocked read and the write would be silently undone.
      const existing = targets.lockedId ? await tx.memory.findUnique({ where: { id: targets.lockedId } }) : null;
      if (existing) {
        // Updating in place is editing: a contributor's push to another member's source_path may not
        // rewrite that memory (PATCH would be 403 too). The same content changes nothing, as a
        // content_hash duplicate does not.
        if (!canEditMemory(role, existing.ownerId === ctx.user.id)) {
          if (existing.contentHash === hash) return { memory: existing, created: false, replaced: [] };
          throw new ApiError("forbidden", `source_path "${input.source_path}" is another member's memory in this hub; your role (${role}) may only update your own`, {
            memory_id: existing.id,
          });
        }
        let replaced: string[] = [];
        let memory: Memory;
        if (file) ({ memory, replaced } = await replaceFile(tx, existing, input, file, hash, now));
        else if (link) ({ memory, replaced } = await refetchLink(tx, existing, input, hash, now));
        else ({ memory, replaced } = await reingest(tx, existing, input, hash, now, glosses));
        if (memory !== existing) await emitEvent(tx, { type: "memory.updated", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id });
        return { memory, created: false, replaced };
      }
    }
    // The duplicate is not locked: a move to another hub or an edit of its content may commit after the
    // read above, and then it is no duplicate here (loaded by id alone, the push answered with another
    // hub's memory, or another content). Gone, moved or changed since, this push stores its memory anew.
    const duplicate = targets.duplicateId ? await tx.memory.findFirst({ where: { id: targets.duplicateId, hubId: ctx.hub.id, contentHash: hash } }) : null;
    if (duplicate) return { memory: duplicate, created: false, replaced: [] };
    const memory = await insert(tx, ctx, input, hash, source, createdAt, now, file);
    if (file) await attachFile(tx, memory, file, now);
    // After the insert and the attach, whose triggers added both to the counters (see assertStorageQuota):
    // the file's bytes count toward the quotas as /v1/usage reports them. The quota's read and the event
    // are one statement (issue 16). Past a quota, that statement records no event, so the server-wide
    // events lock is not held through the refusal.
    const growth = { ownerId: ctx.user.id, hubId: ctx.hub.id, bytes: Buffer.byteLength(input.content, "utf8") + (file?.sizeBytes ?? 0), memories: 1 };
    const event = { type: "memory.created", hubId: memory.hubId, actorId: ctx.user.id, entityId: memory.id } as const;
    const quotaRead = storageQuotaRead(growth);
    if (quotaRead) {
      const { rows, emitted } = await emitEventAfterRead<StorageQuotaRow>(tx, event, quotaRead, storageQuotaPast(growth));
      checkStorageQuota(growth, rows);
      if (!emitted) await emitEvent(tx, event);
    } else await emitEvent(tx, event);
    return { memory, created: true, replaced: [] };
  };
  const attempt = () =>
    ctx.db.$transaction(async (tx) => {
      const result = await write(tx);
      await options.inTransaction?.(tx, result.memory);
      return result;
    });

  let result: { memory: Memory; created: boolean; replaced: string[] };
  try {
    result = await attempt();
  } catch (error) {
    // A concurrent push of the same source_path won the unique index; now it is an update.
    if (!isUniqueViolation(error)) throw error;
    result = await attempt();
  }
  // A replaced original's bytes go once the new one is committed (best effort; the upload sweep retries).
  await removeBlobs(ctx.db, result.replaced);
  afterMemoryWrite(result.memory);
  // Memax's capture promises one memory per decision and learning (extract-capture-facts.ts).
  if (result.created && result.memory.source === CAPTURE_SOURCE) await extractCaptureFacts(ctx, result.memory);
  // A memory found (same content, or updated at its source_path) may be filed under a topic being deleted: shown with none, as GET does.
  const [memory] = result.created ? [result.memory] : await withShownTopics(ctx.sql, [result.memory]);
  return { memory: serializeMemory(memory!), created: result.created, warnings };
}

interface PushTargets {
  /** The caller's role in the hub, read under the shared membership lock (null: no longer a member). */
  role: string | null;
  /** The memory at the push's source_path, locked FOR UPDATE until the transaction ends. */
  lockedId: string | null;
  /** The hub's oldest memory with the push's content. */
  duplicateId: string | null;
}

/**
 * What a push reads once its advisory locks are held, in one statement (three before, issue 16): the
 * membership re-check, the row lock at its source_path and the duplicate check. The statement's
 * snapshot is taken after the locks were granted, so it sees what their previous holders committed.
 */
async function pushTargets(tx: DbClient, ctx: HubContext, sourcePath: string | undefined, hash: string): Promise<PushTargets> {
  const [row] = await tx.$queryRaw<{ role: string | null; locked_id: string | null; duplicate_id: string | null }[]>`
    WITH at_path AS (SELECT id FROM memories WHERE hub_id = ${ctx.hub.id}::uuid AND source_path = ${sourcePath ?? null}::text FOR UPDATE)
    SELECT (SELECT role FROM hub_members WHERE hub_id = ${ctx.hub.id}::uuid AND user_id = ${ctx.user.id}::uuid) AS role,
           (SELECT id::text FROM at_path) AS locked_id,
           (SELECT id::text FROM memories WHERE hub_id = ${ctx.hub.id}::uuid AND content_hash = ${hash} ORDER BY created_at ASC LIMIT 1) AS duplicate_id`;
  return { role: row?.role ?? null, lockedId: row?.locked_id ?? null, duplicateId: row?.duplicate_id ?? null };
}

async function insert(
  tx: DbClient,
  ctx: HubContext,
  input: CreateMemoryBody,
  hash: string,
  source: string,
  createdAt: Date,
  now: Date,
  file: VerifiedFile | null,
): Promise<Memory> {
  const contentType = file ? "file" : (input.content_type ?? inferContentType(input.content, input.source_path));
  const waits = file !== null || contentType === "link";
  const kind = input.kind ?? classifyKind(input.content, contentType, input.hint);
  const memory = await tx.memory.create({
    data: {
      id: newId(createdAt.getTime()),
      hubId: ctx.hub.id,
      ownerId: ctx.user.id,
      title: input.title ?? (file ? file.filename.slice(0, 200) : contentType === "link" ? input.content.slice(0, 200) : deriveTitle(input.content)),
      // A file keeps its filename; a link's title comes from the page.
      titleDerived: input.title === undefined && !file,
      content: input.content,
      contentType,
      contentHash: hash,
      tags: input.tags ?? [],
      kind,
      kindLocked: input.kind !== undefined,
      stability: input.stability ?? classifyStability(input.content, kind, contentType, input.hint),
      stabilityLocked: input.stability !== undefined,
      boundary: "private",
      state: waits ? "processing" : "active",
      source,
      sourceAgent: input.source_agent,
      assistedByAgent: input.assisted_by_agent,
      initiationType: input.initiation_type,
      sourcePath: input.source_path,
      hint: input.hint,
      hubReason: input.hub_reason,
      projectContext: input.project_context,
      ...(file && { fileRef: fileRefOf(file) }),
      processingStatus: "pending",
      createdAt,
      updatedAt: now,
    },
    // The content is what was just sent: read back, up to 3 MiB more crossed the wire and was decoded for nothing.
    omit: { content: true },
  });
  return { ...memory, content: input.content };
}

/** Same hub and source_path: update in place; identical content and fields change nothing. */
/**
 * The chunk glosses a re-push will need when it only retitles its memory (the same content at its
 * source_path under a new title, which the caller may edit), worked out before the push's transaction
 * as a PATCH's first attempt does: the first Chinese text a process meets loads the dictionary, and
 * every Chinese chunk is glossed, which inside the transaction held the memory's row and the hub's
 * locks throughout. Undefined when the push will not retitle (as far as this unlocked read tells).
 */
async function retitleGlosses(ctx: HubContext, input: CreateMemoryBody, hash: string): Promise<{ memoryId: string; byText: Map<string, string> } | undefined> {
  if (!input.source_path || input.title === undefined) return undefined;
  const existing = await ctx.db.memory.findFirst({
    where: { hubId: ctx.hub.id, sourcePath: input.source_path },
    select: { id: true, ownerId: true, contentHash: true, title: true },
  });
  if (!existing || existing.contentHash !== hash || existing.title === input.title) return undefined;
  // Not for a push its transaction will refuse (another member's memory): it must read none of its chunks.
  if (!canEditMemory(ctx.role, existing.ownerId === ctx.user.id)) return undefined;
  return { memoryId: existing.id, byText: await chunkGlosses(ctx.db, existing.id) };
}

async function reingest(
  tx: DbClient,
  existing: Memory,
  input: CreateMemoryBody,
  hash: string,
  now: Date,
  glosses?: { memoryId: string; byText: Map<string, string> },
): Promise<{ memory: Memory; replaced: string[] }> {
  const contentChanged = existing.contentHash !== hash;
  // Text pushed to a file memory's source_path replaces the file, as a link pushed there does: kept, the
  // memory was text that still listed the old file as its attachment and counted its bytes.
  const hadFile = contentChanged && existing.fileRef !== null;
  // A title that was the old file's name follows the text; a chosen one stays.
  const fileTitle = hadFile && existing.title === (existing.fileRef as { filename?: string }).filename;
  const contentType = input.content_type ?? (contentChanged ? inferContentType(input.content, input.source_path) : existing.contentType);
  const kindLocked = existing.kindLocked || input.kind !== undefined;
  const stabilityLocked = existing.stabilityLocked || input.stability !== undefined;
  const kind = input.kind ?? (contentChanged && !kindLocked ? classifyKind(input.content, contentType, input.hint) : existing.kind);
  const changes = {
    content: input.content,
    contentHash: hash,
    contentType,
    title: input.title ?? ((existing.titleDerived || fileTitle) && contentChanged ? deriveTitle(input.content) : existing.title),
    titleDerived: input.title === undefined ? existing.titleDerived || fileTitle : false,
    tags: input.tags ?? existing.tags,
    kind,
    kindLocked,
    stability:
      input.stability ??
      (contentChanged && !stabilityLocked ? classifyStability(input.content, kind, contentType, input.hint) : existing.stability),
    stabilityLocked,
    hint: input.hint ?? existing.hint,
    sourceAgent: input.source_agent ?? existing.sourceAgent,
    assistedByAgent: input.assisted_by_agent ?? existing.assistedByAgent,
    hubReason: input.hub_reason ?? existing.hubReason,
    initiationType: input.initiation_type ?? existing.initiationType,
    ...(input.project_context !== undefined && { projectContext: input.project_context }),
  };
  const unchanged =
    !contentChanged &&
    (Object.keys(changes) as (keyof typeof changes)[]).every((key) => sameJson(changes[key], existing[key]));
  if (unchanged) return { memory: existing, replaced: [] };
  const replaced = hadFile ? await detachUploads(tx, { memoryId: { in: [existing.id] } }) : [];
  if (hadFile) await tx.attachment.deleteMany({ where: { memoryId: existing.id } });
  // Title and text only when they change, as a PATCH writes them: either one named in the UPDATE (even
  // unchanged) rebuilds the search vector from the whole text, and the text written back is a new
  // out-of-line (TOAST) copy of it: megabytes written for a re-push that changed a tag.
  const { content, title, ...rest } = changes;
  const memory = await tx.memory.update({
    where: { id: existing.id },
    data: {
      ...rest,
      ...(contentChanged && { content }),
      ...(title !== existing.title && { title }),
      // The old version's summary may quote what the push took out; the summarise step writes the new one.
      ...(contentChanged && { version: { increment: 1 }, processingStatus: "pending", processingAttempts: 0, processingError: null, summary: "" }),
      // New content pushed to an archived memory (archived by hand, or by a dream as stale or merged)
      // is live again: a push is what the memory says now, and recall must find it.
      ...(contentChanged && existing.state === "archived" && { state: "active", supersededBy: null }),
      ...(hadFile && { fileRef: Prisma.DbNull }),
      // A link waiting to read its page again kept the page and the URL in link_url: the text replaces both.
      ...(contentChanged && existing.linkUrl !== null && { linkUrl: null }),
      // What was read from the file or page it replaces no longer applies: kept, the text was chunked as
      // extracted markdown and its processing_error reported the old source's failure.
      ...(contentChanged && (existing.extractedAt !== null || existing.extractionError !== null) && { extractedAt: null, extractionError: null }),
      updatedAt: now,
    },
  });
  if (contentChanged) await assertGrowth(tx, existing, input.content, -Number(existing.attachmentBytes));
  // Same content, new title: the chunks' lexical entries carry the title (as a PATCH does). Their glosses
  // were worked out before the transaction; those of chunks not glossed then, retitleChunks works out here.
  else if (memory.title !== existing.title) await retitleChunks(tx, existing.id, glosses?.memoryId === existing.id ? glosses.byText : new Map());
  return { memory, replaced };
}

/** Equal as stored: jsonb keeps an object's keys in its own order, not the order they were sent in. */
function sameJson(a: unknown, b: unknown): boolean {
  const sorted = (value: unknown): unknown =>
    value !== null && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)).map(([k, v]) => [k, sorted(v)]))
      : value;
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

/**
 * An update in place, after its write: what the new content adds to the owner's and the hub's stored
 * bytes must fit their quotas (a shrink always does; see assertStorageQuota).
 */
function assertGrowth(tx: DbClient, existing: Memory, content: string, fileGrowth = 0): Promise<void> {
  const growth = Buffer.byteLength(content, "utf8") - Buffer.byteLength(existing.content, "utf8") + fileGrowth;
  return assertStorageQuota(tx, { ownerId: existing.ownerId, hubId: existing.hubId, bytes: growth, memories: 0 });
}

/** Content that is one bare http(s) URL: pushed without a content_type, it becomes a link memory. */
export function isBareUrl(content: string): boolean {
  return /^https?:\/\/\S+$/i.test(content.trim());
}

/** A link memory: content_type "link", or content that is one bare http(s) URL. Returns the URL. */
function linkTarget(input: CreateMemoryBody): string | null {
  if (input.content_type !== "link" && (input.content_type !== undefined || !isBareUrl(input.content))) return null;
  return linkUrlOrThrow(input.content.trim());
}

/** What a link memory's content must be (create and PATCH alike): one http(s) URL, returned without its #fragment. */
export function linkUrlOrThrow(content: string): string {
  const text = content.trim();
  let url: URL;
  try {
    // The URL parser drops newlines and tabs and escapes spaces: "…/page\nnotes" would be read as the
    // page "…/pagenotes", the text folded into the address fetched and kept as source_path.
    if (/\s/.test(text)) throw new Error("whitespace");
    url = new URL(text);
  } catch {
    throw new ApiError("invalid_request", "A link's content must be one http(s) URL", { issues: [{ path: "content", message: "not a URL" }] });
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ApiError("invalid_request", "Only http and https links can be fetched", { issues: [{ path: "content", message: "not http(s)" }] });
  }
  // One link, one source_path: "…/a?" and "…/a" are the same page (URL already drops default ports and lowercases the host).
  url.hash = "";
  if (url.search === "") url.search = "";
  return url.toString();
}

/**
 * The same link again, or a link pushed to a memory's source_path: fetch it afresh (new version, back to
 * `processing`). A file memory there gives up its file: while it kept its file_ref the extract step read
 * the old file instead of the page, and the memory held a link's type over the file's text. Returns the
 * dropped originals' object keys, removed after the commit (as replaceFile's).
 */
async function refetchLink(tx: DbClient, existing: Memory, input: CreateMemoryBody, hash: string, now: Date): Promise<{ memory: Memory; replaced: string[] }> {
  const hadFile = existing.fileRef !== null;
  const replaced = hadFile ? await detachUploads(tx, { memoryId: { in: [existing.id] } }) : [];
  if (hadFile) await tx.attachment.deleteMany({ where: { memoryId: existing.id } });
  // The same URL whose page was read: the page stays the content while it is read again, the URL to read
  // waiting in link_url, so a fetch that fails now keeps what was read last time (with its reason) instead
  // of leaving the memory nothing but its URL. (A link keeps its URL's hash as content_hash once read.)
  // Only a URL short enough to be a source_path: link_url is not counted toward the storage quotas, and a
  // URL given its own source_path may be megabytes long; a longer one waits as the content, counted.
  const keepsPage =
    !hadFile &&
    existing.contentType === "link" &&
    existing.contentHash === hash &&
    existing.extractedAt !== null &&
    existing.content !== input.content &&
    !sourcePathTooLong(input.content);
  const memory = await tx.memory.update({
    where: { id: existing.id },
    data: {
      ...(keepsPage ? { linkUrl: input.content } : { content: input.content, linkUrl: null }),
      contentHash: hash,
      contentType: "link",
      ...(hadFile && { fileRef: Prisma.DbNull }),
      ...(input.title !== undefined
        ? { title: input.title, titleDerived: false }
        : // A title that was the old file's name follows the page, as a pushed link's does; a chosen one stays.
          hadFile && existing.title === (existing.fileRef as { filename?: string }).filename && { title: input.content.slice(0, 200), titleDerived: true }),
      tags: input.tags ?? existing.tags,
      hint: input.hint ?? existing.hint,
      ...namedFields(existing, input),
      ...readAgain(now),
    },
  });
  // A URL may be megabytes long: unchecked, pushing a long one again under a short one's source_path
  // grew stored content past the quotas with no limit but the memory count.
  await assertGrowth(tx, existing, keepsPage ? existing.content : input.content, -Number(existing.attachmentBytes));
  return { memory, replaced };
}

/**
 * What a link or file pushed again names besides its source, written as a text push writes it (reingest):
 * ignored, a re-push with kind or stability left the pipeline's guess (unlocked) and kept the agent,
 * reason, initiation and project context of the first push. The pipeline classifies what the push leaves unnamed and unlocked.
 */
function namedFields(existing: Memory, input: CreateMemoryBody) {
  return {
    ...(input.kind !== undefined && { kind: input.kind, kindLocked: true }),
    ...(input.stability !== undefined && { stability: input.stability, stabilityLocked: true }),
    sourceAgent: input.source_agent ?? existing.sourceAgent,
    assistedByAgent: input.assisted_by_agent ?? existing.assistedByAgent,
    hubReason: input.hub_reason ?? existing.hubReason,
    initiationType: input.initiation_type ?? existing.initiationType,
    ...(input.project_context !== undefined && { projectContext: input.project_context }),
  };
}

/** A link or file memory's source changed: a new version, back to `processing` until its text is read again. */
function readAgain(updatedAt: Date) {
  return {
    state: "processing",
    // Live again (an archived memory too, as a text push leaves it): superseded by nothing. Kept, an
    // active memory still named the one a dream had merged it into.
    supersededBy: null,
    extractedAt: null,
    extractionError: null,
    version: { increment: 1 },
    processingStatus: "pending",
    processingAttempts: 0,
    processingError: null,
    // The old source's summary, until the summarise step has read the new one.
    summary: "",
    updatedAt,
  } as const;
}

/** The `file_ref` a file memory records (the upload it was made from). */
function fileRefOf(file: VerifiedFile) {
  return {
    object_key: file.upload.objectKey,
    filename: file.filename,
    content_type: file.contentType,
    size_bytes: file.sizeBytes,
    sha256: file.sha256,
    ...(file.charset && { charset: file.charset }),
  };
}

/**
 * A file pushed again under the same source_path: the new upload replaces the memory's original and is
 * read again (version +1). The same file with the same content changes nothing (its upload stays
 * unattached, for the sweep). Returns the replaced originals' object keys, removed after the commit.
 */
async function replaceFile(
  tx: DbClient,
  existing: Memory,
  input: CreateMemoryBody,
  file: VerifiedFile,
  hash: string,
  now: Date,
): Promise<{ memory: Memory; replaced: string[] }> {
  if (existing.contentHash === hash && existing.contentType === "file") {
    // The same file again is not read again (no new version), but what the push names still applies, as a
    // text re-push with the same content writes it: returned early, `--kind procedural` a second time was lost.
    const named = namedFields(existing, input);
    // By value: project_context is an object, never the stored JSON by identity (an identical re-push wrote).
    const changed = Object.fromEntries(Object.entries(named).filter(([key, value]) => !sameJson(value, existing[key as keyof typeof named])));
    if (Object.keys(changed).length === 0) return { memory: existing, replaced: [] };
    return { memory: await tx.memory.update({ where: { id: existing.id }, data: { ...changed, updatedAt: now } }), replaced: [] };
  }
  const replaced = await detachUploads(tx, { memoryId: { in: [existing.id] } });
  const previousBytes = Number(existing.attachmentBytes);
  await tx.attachment.deleteMany({ where: { memoryId: existing.id } });
  const previousName = (existing.fileRef as { filename?: string } | null)?.filename;
  const memory = await tx.memory.update({
    where: { id: existing.id },
    data: {
      content: input.content,
      contentHash: hash,
      contentType: "file",
      // A title that was the old file's name follows the new one; a chosen title stays.
      title: input.title ?? (existing.contentType !== "file" || existing.title === previousName ? file.filename.slice(0, 200) : existing.title),
      titleDerived: false,
      tags: input.tags ?? existing.tags,
      hint: input.hint ?? existing.hint,
      ...namedFields(existing, input),
      fileRef: fileRefOf(file),
      ...readAgain(now),
    },
  });
  await attachFile(tx, memory, file, now);
  // The new file's bytes replace the old one's in the counters (the attachments trigger).
  await assertGrowth(tx, existing, input.content, file.sizeBytes - previousBytes);
  return { memory, replaced };
}

/** The upload becomes the memory's original; the conditional update makes a second attach lose. */
async function attachFile(tx: DbClient, memory: Memory, file: VerifiedFile, now: Date): Promise<void> {
  // Conditional on age too: an upload the sweep may be deleting (see ATTACHABLE_FOR_MS) is not attached.
  const { count } = await tx.upload.updateMany({
    where: { id: file.upload.id, attachedAt: null, createdAt: { gt: new Date(now.getTime() - ATTACHABLE_FOR_MS) } },
    data: { attachedAt: now },
  });
  if (count === 0) throw new ApiError("conflict", "This upload is already attached to a memory; upload the file again", { object_key: file.upload.objectKey });
  await tx.attachment.create({
    data: {
      id: newId(now.getTime()),
      memoryId: memory.id,
      hubId: memory.hubId,
      objectKey: file.upload.objectKey,
      filename: file.filename,
      contentType: file.contentType,
      sizeBytes: file.sizeBytes,
      sha256: file.sha256,
      width: file.width,
      height: file.height,
      createdAt: now,
    },
  });
}

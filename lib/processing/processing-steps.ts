import { chatModel, classifyWithModel, summarizeWithModel } from "@/lib/ai/chat-model.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { assertStorageQuota } from "@/lib/quotas/assert-storage-quota.ts";
import { getEmbedder, type Embedder } from "@/lib/ai/embedder.ts";
import type { Db, DbClient } from "@/lib/db/database.ts";
import { emitEvent, type EmitEventInput } from "@/lib/events/emit-event.ts";
import { notifyProcessingFailed } from "@/lib/notifications/notify.ts";
import type { Memory, Prisma } from "@/lib/db/generated/client.ts";
import { replaceChunks, storedChunkVectors } from "@/lib/recall/store-chunks.ts";
import { hanGlossWords } from "@/lib/ai/gloss-han.ts";
import { extractMemoryText, needsExtraction } from "@/lib/extraction/extract-memory-text.ts";
import { chunkContent, type ChunkDraft } from "./chunk-content.ts";
import { classifyKind, classifyStability } from "./classify-heuristic.ts";
import { inferContentType } from "./infer-content-type.ts";
import { clipSummary, summarizeContent } from "./summarize-content.ts";

/** The content a job was started for; every write checks it is still current. */
export interface MemoryVersion {
  id: string;
  hubId: string;
  version: number;
  contentHash: string;
}

/** The memory changed (or was deleted) after the job started; the newer write schedules its own job. */
export class StaleJobError extends Error {
  constructor(memory: MemoryVersion) {
    super(`memory ${memory.id} changed after version ${memory.version}; result discarded`);
  }
}

export interface StepContext {
  db: Db;
  memory: MemoryVersion;
  now: () => Date;
  /**
   * The row as the job last read or wrote it. Steps run in one process share
   * it (one read per job instead of one per step); every write is still
   * guarded by version and content hash, so a stale copy can never win.
   */
  loaded?: Memory;
  /** Aborts when the job's lease is lost (the embedded runner): a step waiting its turn leaves. */
  signal?: AbortSignal;
  /**
   * Set by a runner that executes all steps in one go (the embedded runner): the steps' writes
   * (classification, summary, chunks) are collected here and committed with `complete` in one
   * short transaction instead of four, which is fewer turns on the database and fewer row versions
   * of the memory. Inngest runs each step separately and writes as it goes.
   */
  deferred?: DeferredWrites;
  /**
   * Embed every chunk anew, even one whose text the stored chunks already have a vector for: the
   * re-embedding after a model change (reembed-memories.ts), when the stored vectors are the old model's.
   */
  fresh?: boolean;
  /**
   * The attempt the job claimed (the lease's fencing token, job-lease.ts): `complete` lands only while
   * the memory is still `running` on it. Absent for work that claims nothing (the re-embedding).
   */
  attempt?: number;
}

export interface DeferredWrites {
  changes: MemoryChanges;
  guesses?: Guess[];
  chunks?: IndexedChunks;
}

/**
 * A value the job worked out that the client may have set meanwhile: PATCH kind, stability or
 * content_type keeps the version, so the version guard lets the job's write through. Applied only
 * while `when` still holds (the field unlocked, or as the job read it).
 */
interface Guess {
  when: Prisma.MemoryWhereInput;
  data: MemoryChanges;
}

export type StepName = "extract" | "classify" | "index" | "summarise" | "complete";

export interface ProcessingStep {
  name: StepName;
  /** Idempotent: re-running a step for the same version writes the same result. */
  run(ctx: StepContext): Promise<void>;
}

/**
 * The pipeline's transactions queue behind requests (lib/db/statement-scheduler.ts) and behind each
 * other's chunk writes: waiting for a turn is normal for background work, not a reason to fail.
 */
export const BACKGROUND_TRANSACTION = { maxWait: 60_000, timeout: 60_000 } as const;

const currentWhere = (m: MemoryVersion) => ({ id: m.id, version: m.version, contentHash: m.contentHash });
/** While the job's claim still holds: a takeover claimed the memory with attempts + 1. */
const heldWhere = (ctx: StepContext) => (ctx.attempt === undefined ? {} : { processingStatus: "running", processingAttempts: ctx.attempt });

async function loadCurrent(ctx: StepContext): Promise<Memory> {
  if (ctx.loaded) return ctx.loaded;
  const memory = await ctx.db.memory.findFirst({ where: currentWhere(ctx.memory) });
  if (!memory) throw new StaleJobError(ctx.memory);
  ctx.loaded = memory;
  return memory;
}

type MemoryChanges = Partial<Pick<Memory, "content" | "title" | "extractedAt" | "extractionError" | "linkUrl" | "kind" | "stability" | "contentType" | "summary" | "processingStatus" | "processingError" | "processedAt" | "state">>;

/**
 * Writes `data` only if the memory is still at the job's version (and records `event` with it).
 * With deferred writes, a write without an event is only collected; the one with the event
 * (`complete`) commits everything collected, chunks included.
 */
async function writeIfCurrent(ctx: StepContext, data: MemoryChanges, event?: EmitEventInput, options: { now?: boolean; guesses?: Guess[]; held?: boolean } = {}): Promise<void> {
  const deferred = options.now ? undefined : ctx.deferred;
  if (deferred && !event) {
    Object.assign(deferred.changes, data);
    deferred.guesses = [...(deferred.guesses ?? []), ...(options.guesses ?? [])];
    if (ctx.loaded) for (const change of [data, ...(options.guesses ?? []).map((guess) => guess.data)]) Object.assign(ctx.loaded, change);
    return;
  }
  const all = deferred ? { ...deferred.changes, ...data } : data;
  const guesses = [...(deferred?.guesses ?? []), ...(options.guesses ?? [])];
  const pendingChunks = deferred?.chunks;
  const write = async (db: DbClient) => {
    // Nothing but guesses: a no-op write still checks the version (Prisma counts an empty update as 0 rows).
    const data = Object.keys(all).length ? all : { version: ctx.memory.version };
    const { count } = await db.memory.updateMany({ where: { ...currentWhere(ctx.memory), ...(options.held && heldWhere(ctx)) }, data });
    if (count === 0) throw new StaleJobError(ctx.memory);
    // Each guess is one conditional statement after the guarded write (which, in a transaction, holds
    // the row's lock): a client's edit either committed before (its value stays) or comes after (and
    // overrides the guess).
    for (const guess of guesses) await db.memory.updateMany({ where: { ...currentWhere(ctx.memory), ...guess.when }, data: guess.data });
    // Read under the lock the update took: the memory may have moved hubs since the job loaded it, and
    // the members of the hub it left must not hear of it.
    const hubId = pendingChunks || event ? (await db.memory.findUniqueOrThrow({ where: { id: ctx.memory.id }, select: { hubId: true } })).hubId : undefined;
    if (pendingChunks) await writeChunks(db, ctx.memory, pendingChunks, hubId);
    if (event) await emitEvent(db, { ...event, hubId });
  };
  await (event ? ctx.db.$transaction(write, BACKGROUND_TRANSACTION) : write(ctx.db));
  if (ctx.deferred && deferred) ctx.deferred = { changes: {} };
  if (ctx.loaded) Object.assign(ctx.loaded, all);
}

/** Text handed to the embedding model: the section path gives a chunk its context. */
export function embeddingText(chunk: ChunkDraft): string {
  return chunk.headingChain ? `${chunk.headingChain}\n${chunk.content}` : chunk.content;
}

/**
 * A chunk whose text the memory's stored chunks already hold keeps its vector: a job run again for
 * the same version embeds nothing, and an edit to one section of a long note embeds that section, not
 * the note (a new title runs no job: retitleChunks rewrites the lexical entries). Only a vector
 * `embedder` made is kept: after a model change the stored ones are another model's, and kept they
 * mixed two models' vectors in one memory. Chunks stored before the model was recorded (NULL, migration
 * 20261130190010) are of a model no one knows, so a memory's first edit after it embeds every chunk
 * (docs/processing.md: naming the model when it never changed). `fresh` keeps none.
 */
async function embedChunks(ctx: StepContext, embedder: Embedder, chunks: ChunkDraft[]): Promise<number[][]> {
  const texts = chunks.map(embeddingText);
  const known = new Map<string, number[]>();
  if (!ctx.fresh) for (const [text, stored] of await storedChunkVectors(ctx.db, ctx.memory.id)) if (stored.model === embedder.id) known.set(text, stored.vector);
  const missing = [...new Set(texts.filter((text) => !known.has(text)))];
  if (missing.length) (await embedder.embed(missing, "document")).forEach((vector, i) => known.set(missing[i]!, vector));
  return texts.map((text) => known.get(text)!);
}

/** A memory's chunks, ready to store: vectors when a model is available, and their Chinese words' English index words. */
interface IndexedChunks {
  chunks: ChunkDraft[];
  /** A chunk's null: none (the failure fallback keeps only the vectors its stored chunks had). */
  vectors: (number[] | null)[] | null;
  /** The model each vector came from (chunks.embedding_model). */
  models: (string | null)[] | null;
  glosses: string[];
}

/**
 * Worked out before any transaction: the first Chinese text a process meets loads the dictionary
 * (gloss-han.ts), which must not happen while a transaction holds locks or the embedded database.
 */
async function indexedChunks(chunks: ChunkDraft[], vectors: IndexedChunks["vectors"], models: IndexedChunks["models"]): Promise<IndexedChunks> {
  return { chunks, vectors, models, glosses: await Promise.all(chunks.map((chunk) => hanGlossWords(embeddingText(chunk)))) };
}

/** Chunks (with vectors when a model is available) replace the memory's index entries atomically. */
export async function storeChunks(ctx: StepContext, chunks: ChunkDraft[], vectors: number[][] | null, model: string | null): Promise<void> {
  const indexed = await indexedChunks(chunks, vectors, vectors && chunks.map(() => model));
  await ctx.db.$transaction(async (tx) => {
    // A no-op guarded update: it locks the row, so a concurrent content change waits for us and then wins.
    const { count } = await tx.memory.updateMany({ where: currentWhere(ctx.memory), data: { version: ctx.memory.version } });
    if (count === 0) throw new StaleJobError(ctx.memory);
    await writeChunks(tx, ctx.memory, indexed);
  }, BACKGROUND_TRANSACTION);
}

/** After a guarded update of the memory's row in the same transaction (which locks it). `hubId`: read under that lock already. */
async function writeChunks(tx: DbClient, memory: MemoryVersion, { chunks, vectors, models, glosses }: IndexedChunks, knownHubId?: string): Promise<void> {
  // Read under that lock: the memory may have moved to another hub since the job started.
  const hubId = knownHubId ?? (await tx.memory.findUniqueOrThrow({ where: { id: memory.id }, select: { hubId: true } })).hubId;
  await replaceChunks(
    tx,
    { id: memory.id, hubId },
    chunks.map((chunk, i) => ({ ...chunk, embedding: vectors?.[i] ?? null, embeddingModel: models?.[i] ?? null, gloss: glosses[i]! })),
  );
}

/** Extracted file and link text is markdown, whatever the memory's content_type says. */
const textFormat = (memory: Pick<Memory, "contentType" | "extractedAt">) => (memory.extractedAt ? "markdown" : memory.contentType);

/** Files and links: their text becomes the content (once per version) before anything else runs. */
const extract: ProcessingStep = {
  name: "extract",
  async run(ctx) {
    const memory = await loadCurrent(ctx);
    if (!needsExtraction(memory)) return;
    const result = await extractMemoryText(memory, { signal: ctx.signal });
    const changes: MemoryChanges = { content: result.content, extractedAt: ctx.now(), extractionError: result.error, ...(memory.linkUrl !== null && { linkUrl: null }) };
    // PATCH title keeps the version, so the version guard alone would let the page's title replace a
    // title the client chose while the page was read: it applies only while the title is still derived.
    const title = memory.titleDerived && result.title ? result.title.slice(0, 200) : undefined;
    // Written at once (a retry or the lexical fallback of a failure must find the extracted text), and
    // held to the storage quotas as a push is: the text read from a file or page may be megabytes
    // where the push counted only a URL or a note.
    const growth = Buffer.byteLength(result.content, "utf8") - Buffer.byteLength(memory.content, "utf8");
    try {
      await ctx.db.$transaction(async (tx) => {
        // Only while the claim holds: a job that lost its lease learns of it at its next renewal (up to a
        // third of a lease later), and meanwhile wrote the page or file it read over its new owner's.
        const { count } = await tx.memory.updateMany({ where: { ...currentWhere(ctx.memory), ...heldWhere(ctx) }, data: changes });
        if (count === 0) throw new StaleJobError(ctx.memory);
        // After the update above, which holds the row's lock: a client's title committed before it stays.
        if (title !== undefined) {
          const titled = await tx.memory.updateMany({ where: { ...currentWhere(ctx.memory), titleDerived: true }, data: { title } });
          if (titled.count === 1) changes.title = title;
        }
        // The hub and owner as they are now, read under the row lock the update took: a move or an owner
        // change since the memory was loaded (a page can take seconds to read) put the growth on other
        // counters, and checking the old hub's let the text past the new hub's quota.
        const owner = await tx.memory.findUniqueOrThrow({ where: { id: memory.id }, select: { ownerId: true, hubId: true } });
        await assertStorageQuota(tx, { ownerId: owner.ownerId, hubId: owner.hubId, bytes: growth, memories: 0 });
      }, BACKGROUND_TRANSACTION);
      if (ctx.loaded) Object.assign(ctx.loaded, changes);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== "quota_exceeded") throw error;
      // Over a quota: the memory keeps what it had and says why its text was not read in. The URL a page
      // read again waited in is done with too: kept, a later run would read the page again.
      await writeIfCurrent(
        ctx,
        { extractedAt: ctx.now(), extractionError: `The text was not stored: ${error.message}`.slice(0, 1000), ...(memory.linkUrl !== null && { linkUrl: null }) },
        undefined,
        { now: true, held: true },
      );
    }
  },
};

const classify: ProcessingStep = {
  name: "classify",
  async run(ctx) {
    const memory = await loadCurrent(ctx);
    const contentType = memory.contentType || inferContentType(memory.content, memory.sourcePath);
    if (memory.kindLocked && memory.stabilityLocked && contentType === memory.contentType) return;
    const model = chatModel();
    const guess = model
      ? await classifyWithModel(model, { ...memory, contentType })
      : (() => {
          const kind = classifyKind(memory.content, contentType, memory.hint);
          return { kind, stability: classifyStability(memory.content, kind, contentType, memory.hint) };
        })();
    const kind = memory.kindLocked ? memory.kind : guess.kind;
    const stability = memory.stabilityLocked ? memory.stability : guess.stability;
    const guesses: Guess[] = [
      ...(kind !== memory.kind ? [{ when: { kindLocked: false }, data: { kind } }] : []),
      ...(stability !== memory.stability ? [{ when: { stabilityLocked: false }, data: { stability } }] : []),
      ...(contentType !== memory.contentType ? [{ when: { contentType: memory.contentType }, data: { contentType } }] : []),
    ];
    if (guesses.length) await writeIfCurrent(ctx, {}, undefined, { guesses });
  },
};

const index: ProcessingStep = {
  name: "index",
  async run(ctx) {
    const memory = await loadCurrent(ctx);
    const chunks = chunkContent(memory.content, textFormat(memory));
    const embedder = await getEmbedder();
    const vectors = embedder && chunks.length ? await embedChunks(ctx, embedder, chunks) : null;
    if (ctx.deferred) ctx.deferred.chunks = await indexedChunks(chunks, vectors, vectors && chunks.map(() => embedder!.id));
    else await storeChunks(ctx, chunks, vectors, embedder?.id ?? null);
  },
};

const summarise: ProcessingStep = {
  name: "summarise",
  async run(ctx) {
    const memory = await loadCurrent(ctx);
    const model = chatModel();
    const summary = model ? clipSummary(await summarizeWithModel(model, memory)) : summarizeContent(memory.content, textFormat(memory), memory.title);
    if (summary !== memory.summary) await writeIfCurrent(ctx, { summary });
  },
};

const complete: ProcessingStep = {
  name: "complete",
  async run(ctx) {
    const memory = await loadCurrent(ctx);
    // Held: a job taken over after its last lease check must not finish the memory under its new owner.
    await writeIfCurrent(ctx, {
      processingStatus: "done",
      // What extraction could not read stays visible once the rest succeeded.
      processingError: memory.extractionError,
      processedAt: ctx.now(),
      // Files and links wait in "processing" until their text is indexed.
      ...(memory.state === "processing" && { state: "active" }),
    }, { type: "memory.processed", hubId: memory.hubId, entityId: memory.id }, { held: true });
  },
};

/** The pipeline both runners execute, in order. */
export const PROCESSING_STEPS: readonly ProcessingStep[] = [extract, classify, index, summarise, complete];

/**
 * The memory gave up: it ends `failed` with the reason, stays readable, and
 * keeps whatever could be indexed — at least lexical chunks and a heuristic
 * summary, so recall still finds it by its words. Returns whether it was marked failed.
 */
export async function failMemory(
  ctx: StepContext,
  reason: string,
  options: { indexed: boolean; attempt?: number; asRead?: Prisma.MemoryWhereInput },
): Promise<boolean> {
  // `attempt`: only while that attempt still holds the memory (a takeover has claimed it with attempts + 1).
  // `asRead`: only while the row is as a sweep read it, so another process giving up too, or a lease
  // renewed since, makes this match nothing.
  const held = { ...(options.attempt !== undefined && { processingStatus: "running", processingAttempts: options.attempt }), ...options.asRead };
  const memory = await ctx.db.memory.findFirst({ where: { ...currentWhere(ctx.memory), ...held } });
  if (!memory) return false;
  // The lexical fallback is worked out here (glosses load the dictionary outside any transaction) and
  // written under the fence below: written before it, a job whose lease was renewed after the read above
  // lost its vectors to a give-up that then matched nothing. Chunks whose text is stored already keep
  // their vectors, each with the model it came from, as it was stored.
  let fallback: IndexedChunks | undefined;
  if (!options.indexed) {
    const chunks = chunkContent(memory.content, textFormat(memory));
    const known = await storedChunkVectors(ctx.db, memory.id);
    const stored = chunks.map((chunk) => known.get(embeddingText(chunk)));
    fallback = await indexedChunks(chunks, stored.map((s) => s?.vector ?? null), stored.map((s) => s?.model ?? null));
  }
  // The failure, its chunks and its notification to the owner commit together. Chunks that cannot be
  // written (the reason the index step failed, perhaps) must not keep the failure from being recorded:
  // the row would stay `running` with its attempts used up, failed again and again by every sweep.
  let chunksRefused = false;
  const recordFailure = (chunks: IndexedChunks | undefined): Promise<boolean> =>
    ctx.db.$transaction(async (tx) => {
      const { count } = await tx.memory.updateMany({
        where: { ...currentWhere(ctx.memory), ...held },
        data: {
          processingStatus: "failed",
          processingError: reason.slice(0, 1000),
          processedAt: ctx.now(),
          ...(memory.summary ? {} : { summary: summarizeContent(memory.content, textFormat(memory), memory.title) }),
          ...(memory.state === "processing" && { state: "active" }),
        },
      });
      if (count === 0) return false;
      if (chunks) {
        try {
          await writeChunks(tx, ctx.memory, chunks);
        } catch (error) {
          chunksRefused = true;
          throw error;
        }
      } else if (chunksRefused) {
        // The memory's stored chunks may be an earlier version's text: none rather than those.
        await replaceChunks(tx, { id: memory.id, hubId: memory.hubId }, []);
      }
      // Read under the lock the update took: the memory may have moved hubs (or owners) since it was read
      // above, and the members of the hub it left must not hear of it.
      const current = await tx.memory.findUniqueOrThrow({ where: { id: memory.id }, select: { id: true, hubId: true, ownerId: true, title: true } });
      await notifyProcessingFailed(tx, current, reason);
      return true;
    }, BACKGROUND_TRANSACTION);
  try {
    return await recordFailure(fallback);
  } catch (error) {
    // Only the chunks' own refusal: any other error (a deadlock, a lost connection) fails this give-up,
    // and the next sweep tries again with its chunks.
    if (!chunksRefused) throw error;
    console.error(`[engram] processing: lexical fallback for memory ${memory.id} failed; recording the failure without it`, error);
    return recordFailure(undefined);
  }
}

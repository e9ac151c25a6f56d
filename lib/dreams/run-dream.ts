import { randomUUID } from "node:crypto";
import type { Db, SqlRunner } from "@/lib/db/database.ts";
import { Prisma } from "@/lib/db/generated/client.ts";
import { positiveIntEnv } from "@/lib/config.ts";
import { chatModel, mergeWithModel, MERGE_MAX_INPUT_CHARS, nameTopicWithModel } from "@/lib/ai/chat-model.ts";
import { emitEvent } from "@/lib/events/emit-event.ts";
import { newId } from "@/lib/ids.ts";
import { contentHash } from "@/lib/memories/create-memory.ts";
import { afterMemoryWrite } from "@/lib/processing/after-memory-write.ts";
import { onContradictionsFlagged } from "@/lib/notifications/notify.ts";
import { memoryEmbeddings } from "@/lib/recall/memory-embeddings.ts";
import { MAX_POSITION, MAX_TOPICS_PER_HUB } from "@/lib/topics/topic-fields.ts";
import type { DreamConfig } from "./dream-config.ts";
import { hubDreamSettings, withDreamSettings } from "./dream-settings.ts";
import { lockMemoryRows } from "@/lib/db/row-lock.ts";
import { MEMORY_MOVED_RESOLUTION } from "@/lib/memories/drop-memory-copies.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { topicsLockKey } from "@/lib/topics/hub-topics.ts";
import { hubMembersLockKey } from "@/lib/hubs/hub-access.ts";
import { lockUsageCounters, type UsageCounterKey } from "@/lib/quotas/lock-usage-counters.ts";
import { fitsStorageQuota } from "@/lib/quotas/assert-storage-quota.ts";
import { archiveSuperseded, assignTopics, insertOrganizeActions } from "./bulk-updates.ts";
import { buildDreamReport, SECTION_LINES } from "./dream-report-text.ts";
import { runCounts } from "./dream-queries.ts";
import { ZERO_COUNTS } from "./serialize-dream.ts";
import { findSimilarPairs, olderNewer, type DreamMemory } from "./find-similar-pairs.ts";
import { organizeMemories, uniqueName } from "./organize-memories.ts";
import { textFeatures } from "./text-features.ts";

export const DREAM_PHASES = ["similar", "stale", "organize"] as const;
const ACTION_TYPES = ["merge", "contradiction", "archive", "organize"] as const;
export type DreamPhase = (typeof DREAM_PHASES)[number];

export interface DreamDeps {
  db: Db;
  sql: SqlRunner;
  config: DreamConfig;
  now?: () => Date;
  /** Tests: called after each committed batch (throw to simulate a crash there). */
  afterBatch?: (phase: DreamPhase, batch: number) => void | Promise<void>;
  /** The hub's memories as loaded by the first phase of this attempt; later phases reuse them. */
  cache?: { memories?: DreamMemory[] };
  /** The worker's process is stopping (a graceful stop): the run ends before its next batch. */
  stopping?: () => boolean;
  /** Aborts with a graceful stop: cancels the run's model calls in flight (the stop's grace is shorter than their timeout). */
  signal?: AbortSignal;
  /** Told each heartbeat this attempt wrote (see the Inngest phase step's stop). */
  onBeat?: (at: Date) => void;
  /**
   * The attempt's own token (takeDreamAttempt): an Inngest step's retry holds the same lease, so only
   * this tells a cut attempt's late writes from the retry's. Without one (the in-process worker, whose
   * lease is its own) the lease alone decides.
   */
  attempt?: string;
}

/** Another worker took the run over (its heartbeat looked dead): stop without touching it. */
export class LostLeaseError extends Error {}
/** The run's time budget is spent: it stops between batches and ends partial_failed. */
export class OutOfTimeError extends Error {}
/** The worker's process is stopping: the run stops between batches, still running, for a worker to resume. */
export class StoppedError extends Error {}

/**
 * The run's row, read between its batches. Gone with its hub (a purge's cascade) it is a lease lost
 * like any other: read with findUniqueOrThrow, a purge landing just before the closing step ended the
 * run on "No record was found", logged as failed (an Inngest step failed with its retries).
 */
async function runRow(db: Db, runId: string, owner: string) {
  const run = await db.dreamRun.findUnique({ where: { id: runId } });
  if (!run) throw new LostLeaseError(`dream run ${runId} is gone (its hub was deleted); no longer held by ${owner}`);
  return run;
}

type Tx = Parameters<Parameters<Db["$transaction"]>[0]>[0];

/** Characters of a memory the word checks read: bounded cost for very long memories. */
const FEATURE_CHARS = 4000;

/**
 * Takes a queued run, or a running one whose worker stopped heartbeating
 * (crashed): returns whether this worker now holds it. A run of a hub marked deleted is left for
 * the purge (an event or a queue sent before the delete still names it). `takeOverFrom`: a lease this
 * worker may take over however fresh, held under an owner it went by before.
 */
export async function claimDreamRun(db: Db, runId: string, owner: string, now: Date, staleRunMs: number, takeOverFrom?: string): Promise<boolean> {
  const stale = new Date(now.getTime() - staleRunMs);
  const claimed = await db.$executeRaw`
    UPDATE dream_runs r SET status = 'running', lease_owner = ${owner}, attempt_token = NULL, attempt_step = NULL, attempt_number = NULL, heartbeat_at = ${now}, attempts = r.attempts + 1
     WHERE r.id = ${runId}::uuid
       AND (r.status = 'queued' OR (r.status = 'running' AND (r.heartbeat_at < ${stale} OR r.heartbeat_at IS NULL OR r.lease_owner IN (${owner}, ${takeOverFrom ?? owner}))))
       AND EXISTS (SELECT 1 FROM hubs h WHERE h.id = r.hub_id AND h.deleted_at IS NULL)`;
  if (claimed === 0) return false;
  await db.dreamRun.updateMany({ where: { id: runId, startedAt: null }, data: { startedAt: now } });
  return true;
}

/**
 * Makes this attempt the one that works on a run this worker holds (an Inngest step's attempt: its
 * retry holds the same lease): returns its token for DreamDeps.attempt, or null when the run is no
 * longer held. The token of an attempt before it then matches no write, so a cut attempt that goes on
 * (a model answer arriving late) writes nothing beside its retry.
 * `at`: the step (its place in the run) and Inngest's attempt number of it. Only while the run is held
 * by no later attempt: a cut attempt that reached its take after its retry had taken the run took it back
 * (the last take won), and the retry's next write ended it lost, the run left running for the schedule.
 */
export async function takeDreamAttempt(db: Db, runId: string, owner: string, at: { step: number; attempt: number }): Promise<string | null> {
  const token = randomUUID();
  const taken = await db.$executeRaw`
    UPDATE dream_runs r SET attempt_token = ${token}, attempt_step = ${at.step}, attempt_number = ${at.attempt}
     WHERE r.id = ${runId}::uuid AND r.status = 'running' AND r.lease_owner = ${owner}
       AND (r.attempt_step IS NULL OR r.attempt_number IS NULL OR r.attempt_step < ${at.step} OR (r.attempt_step = ${at.step} AND r.attempt_number <= ${at.attempt}))`;
  return taken === 1 ? token : null;
}

/** The run's row as this attempt may write it: the lease's, and the attempt's token when it has one. */
export function heldBy(owner: string, attempt: string | undefined) {
  return { status: "running", leaseOwner: owner, ...(attempt !== undefined && { attemptToken: attempt }) };
}

/** The same in SQL, for the run's row aliased `r`. */
function heldSql(owner: string, attempt: string | undefined) {
  return Prisma.sql`r.status = 'running' AND r.lease_owner = ${owner} AND (${attempt ?? null}::text IS NULL OR r.attempt_token = ${attempt ?? null}::text)`;
}

/**
 * Runs (or resumes) a claimed run to the end: each phase from the one it
 * stopped in, each batch of actions committed together with the run's
 * progress, so a crash loses at most the batch in flight and a resume redoes
 * nothing (phases skip what is already archived, sorted or flagged).
 */
export async function executeDreamRun(deps: DreamDeps, runId: string, owner: string): Promise<string> {
  const now = deps.now ?? (() => new Date());
  const run = await runRow(deps.db, runId, owner);
  // The budget is the run's, from its first claim (see runBudgetStart), not this attempt's.
  const startedAt = runBudgetStart(run, now());
  let timedOut = false;
  const startIndex = run.phase === "done" ? DREAM_PHASES.length : Math.max(0, DREAM_PHASES.indexOf(run.phase as DreamPhase));
  const cached = { ...deps, cache: deps.cache ?? {} };
  for (const phase of DREAM_PHASES.slice(startIndex)) {
    try {
      await runDreamPhase(cached, runId, owner, phase, startedAt);
    } catch (error) {
      if (!(error instanceof OutOfTimeError)) throw error;
      timedOut = true;
      break;
    }
  }
  return finishDreamRun(deps, runId, owner, timedOut);
}

/**
 * When the run's time budget began: its first claim (started_at), across every attempt that resumes it.
 * Counted from each attempt's own start, every resume (a crashed or stopped worker's, a re-sent Inngest
 * event's) got a whole new budget, and a run resumed again and again was never out of time.
 */
export function runBudgetStart(run: { startedAt: Date | null }, now: Date): number {
  return (run.startedAt ?? now).getTime();
}

interface BatchContext {
  deps: DreamDeps;
  runId: string;
  hubId: string;
  owner: string;
  phase: DreamPhase;
  startedAt: number;
  batches: number;
}

/**
 * One transaction: the heartbeat that proves this worker still holds the run, then the batch's writes.
 * Lock order, the same as every other write into the hub: the hub's membership lock (shared), the
 * run's row, the hub's topic lock (organize), the memories in id order. A hub delete takes that
 * membership lock exclusively before the hub's memories and (by its cascade) the run's row; without
 * it first, a batch holding the run's row and waiting for a memory the delete held deadlocked with it.
 */
async function commitBatch(ctx: BatchContext, write: (tx: Tx, now: Date) => Promise<void>, options: { phaseDone?: boolean } = {}): Promise<void> {
  const now = (ctx.deps.now ?? (() => new Date()))();
  // A phase's done record is saved however the stop or the budget stands: its work is written, and
  // refused, the next attempt did the whole phase again (reading the hub, its model calls) for nothing.
  if (!options.phaseDone && stopping(ctx.deps)) throw new StoppedError(`dream run ${ctx.runId}: the worker is stopping`);
  if (!options.phaseDone && now.getTime() - ctx.startedAt > ctx.deps.config.maxRunMs) throw new OutOfTimeError();
  const beat = await ctx.deps.db.$transaction(async (tx) => {
    await lockForTransaction(tx, { shared: hubMembersLockKey(ctx.hubId) });
    // A hub marked deleted since the run began ends it here too (the mark took that lock exclusively):
    // its writes would only be purged.
    // A phase's done record beats only while the run is still in that phase: past it, an Inngest step's
    // retry (the same lease) recorded it, and this attempt's beat over the retry's was one its stop then
    // matched and cleared, the retry's heartbeat with it.
    const held = await tx.$executeRaw`
      UPDATE dream_runs r SET heartbeat_at = ${now}
       WHERE r.id = ${ctx.runId}::uuid AND ${heldSql(ctx.owner, ctx.deps.attempt)}
         AND (${!options.phaseDone}::boolean OR r.phase = ${ctx.phase})
         AND EXISTS (SELECT 1 FROM hubs h WHERE h.id = r.hub_id AND h.deleted_at IS NULL)`;
    if (held === 1) {
      await write(tx, now);
      return true;
    }
    if (options.phaseDone) {
      const [still] = await tx.$queryRaw<unknown[]>`
        SELECT 1 FROM dream_runs r WHERE r.id = ${ctx.runId}::uuid AND ${heldSql(ctx.owner, ctx.deps.attempt)}
           AND EXISTS (SELECT 1 FROM hubs h WHERE h.id = r.hub_id AND h.deleted_at IS NULL)`;
      if (still) return false;
    }
    throw new LostLeaseError(`dream run ${ctx.runId} is no longer held by ${ctx.owner}`);
  });
  if (beat) ctx.deps.onBeat?.(now);
  ctx.batches += 1;
  await ctx.deps.afterBatch?.(ctx.phase, ctx.batches);
}

const stopping = (deps: DreamDeps) => Boolean(deps.signal?.aborted || deps.stopping?.());

function chunked<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Beats for the run while a phase works between its batches: reading and comparing a large hub, and
 * with a chat model the merge rewrites (up to half the run's budget) and topic names, go on longer
 * than a heartbeat stays fresh, and another worker's sweep would take the run for crashed. Each beat
 * holds the run only while this worker does (a lost lease is found by the next batch). Returns the
 * stop, which waits for a beat in flight.
 */
function keepHeartbeat(deps: DreamDeps, runId: string, owner: string): () => Promise<void> {
  // Zero: the embedded database's only process resumes any `running` run; no other worker looks.
  if (deps.config.staleRunMs <= 0) return async () => {};
  const now = deps.now ?? (() => new Date());
  let beating: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    // Stopping, this attempt holds the run no longer: an Inngest step's retry (the same lease) may be
    // beating by now, and a beat here over its beats was one the stopped step's clear then matched.
    if (beating || stopping(deps)) return;
    const at = now();
    beating = deps.db.dreamRun
      .updateMany({ where: { id: runId, ...heldBy(owner, deps.attempt) }, data: { heartbeatAt: at } })
      .then((beat) => beat.count > 0 && deps.onBeat?.(at))
      .catch((error: unknown) => console.error(`[engram] dreams: heartbeat of run ${runId} failed`, error))
      .finally(() => (beating = undefined));
  }, Math.max(50, Math.floor(deps.config.staleRunMs / 4)));
  timer.unref();
  return async () => {
    clearInterval(timer);
    await beating;
  };
}

/** Runs one phase and records it done (the Inngest function runs each phase as a step). */
export async function runDreamPhase(deps: DreamDeps, runId: string, owner: string, phase: DreamPhase, startedAt = Date.now()): Promise<void> {
  const phaseStart = performance.now();
  const run = await runRow(deps.db, runId, owner);
  // Out of time already (a run resumed past its budget): before reading and comparing the whole hub.
  if ((deps.now ?? (() => new Date()))().getTime() - startedAt > deps.config.maxRunMs) throw new OutOfTimeError();
  // Read at each phase (an Inngest run takes each as a step, maybe hours apart): a switch turned off
  // meanwhile stops the steps still to come.
  const settings = await hubDreamSettings(deps.db, run.hubId);
  const scheduled = run.triggeredBy === null;
  const config = withDreamSettings(deps.config, settings, scheduled);
  // A scheduled run of a hub whose dreams are off (queued before the switch) takes no step at all: the
  // merge, archive and organize switches alone left the similar step flagging contradictions, each a
  // notification to every manager of a hub they had turned off.
  const off = scheduled && !settings.enabled;
  const ctx: BatchContext = { deps: { ...deps, config }, runId, hubId: run.hubId, owner, phase, startedAt, batches: 0 };
  const stopHeartbeat = keepHeartbeat(deps, runId, owner);
  let metrics: Record<string, number>;
  try {
    if (off || (phase === "stale" && !config.archiveEnabled) || (phase === "organize" && !config.organizeEnabled)) metrics = { skipped: 1, candidates: 0, actions: 0 };
    else metrics = phase === "similar" ? await similarPhase(ctx, run.hubId) : phase === "stale" ? await stalePhase(ctx, run.hubId) : await organizePhase(ctx, run.hubId);
  } finally {
    await stopHeartbeat();
  }
  const next = DREAM_PHASES[DREAM_PHASES.indexOf(phase) + 1] ?? "done";
  const previous = (run.phaseMetrics ?? {}) as Record<string, Record<string, number>>;
  // Also when the worker is stopping or the budget ran out after the last batch: every batch of the
  // phase is saved, and refused here the record of it was lost, so the resumed (or next) run did the
  // phase again (its topic names asked of the model again). The budget stops the next phase instead.
  // Only while the run is still in this phase: an Inngest step's retry runs under the same lease, and
  // this attempt, finishing late (its request cut, a model answer slow), moved the run back to the phase
  // after this one and wrote its metrics over those of the phases the retry had recorded meanwhile.
  await commitBatch({ ...ctx }, async (tx) => {
    await tx.dreamRun.updateMany({
      where: { id: runId, phase },
      data: {
        phase: next,
        phaseMetrics: { ...previous, [phase]: { ...metrics, batches: ctx.batches, duration_ms: Math.round(performance.now() - phaseStart) } },
        ...(phase === "similar" && { memoriesScanned: metrics.scanned ?? 0 }),
      },
    });
  }, { phaseDone: true });
  if (stopping(deps)) throw new StoppedError(`dream run ${runId}: the worker is stopping`);
}

async function loadMemories(deps: DreamDeps, hubId: string): Promise<DreamMemory[]> {
  if (deps.cache?.memories) return deps.cache.memories;
  const memories = await readMemories(deps, hubId);
  if (deps.cache) deps.cache.memories = memories;
  return memories;
}

/** The memories a phase may act on: not those of a kind the hub's owner excluded from dreams. */
function included(config: DreamConfig, memories: DreamMemory[]): DreamMemory[] {
  if (config.excludedKinds.length === 0) return memories;
  const excluded = new Set(config.excludedKinds);
  return memories.filter((m) => !excluded.has(m.kind));
}

/** Memories archived by this attempt leave the cached set. */
function forget(deps: DreamDeps, ids: Iterable<string>): void {
  if (!deps.cache?.memories) return;
  const gone = new Set(ids);
  deps.cache.memories = deps.cache.memories.filter((m) => !gone.has(m.id));
}

async function readMemories(deps: DreamDeps, hubId: string): Promise<DreamMemory[]> {
  const [rows, embeddings] = await Promise.all([
    // A fixed order: clustering is greedy, and PostgreSQL's heap order changes as rows are updated,
    // so without one a resumed run (or any rerun) could group the same memories differently.
    // Only the part of the content the checks read: a memory may hold megabytes, a hub thousands of them.
    // left() counts characters, slice() below UTF-16 units: the prefix read always covers the one used.
    // Not a memory whose edit is pending or running: its vectors are still the old text's (see
    // memoryEmbeddings); the first run after it is processed compares and files it.
    deps.db.$queryRaw<{ id: string; title: string; content: string; contentChangedAt: Date; topicId: string | null; kind: string }[]>`
      SELECT id::text AS id, title, left(content, ${FEATURE_CHARS}::int) AS content, content_changed_at AS "contentChangedAt", topic_id::text AS "topicId", kind
        FROM memories WHERE hub_id = ${hubId}::uuid AND state = 'active' AND processing_status NOT IN ('pending', 'running') ORDER BY id`,
    memoryEmbeddings(deps.sql, hubId),
  ]);
  return rows.map((row) => ({
    id: row.id,
    title: row.title,
    contentChangedAt: row.contentChangedAt,
    topicId: row.topicId,
    kind: row.kind,
    features: textFeatures(`${row.title}\n${row.content.slice(0, FEATURE_CHARS)}`),
    embedding: embeddings.get(row.id),
  }));
}

/*
 * What the owner already ruled on: an undone merge, archive or filing is not redone, a flagged pair not
 * flagged again. Read for the memories a phase considers only (the GIN index on source_memory_ids): a
 * hub's undone actions and reviews grow with every run, and each phase read them all.
 * A member's restore, split or decision follows the memory to another hub (a batch move): looked up in
 * the memory's current hub only, the new hub's first run archived, merged or flagged it again. Only
 * whether an action exists is read from another hub, nothing of it reaches this run's actions or report.
 */

/**
 * Of these pairs, those ever merged or flagged, in any hub, as sorted "a:b" keys. A pair a run reads is
 * of two active memories: one merged before is active again because a member restored it (the undo, or
 * a PATCH of its state), and that decision wins; only undone merges counted, and a restore by PATCH was
 * merged again by the next run. A review closed because one side moved away was decided by no one: the
 * pair together again (in the hub it moved to, or back where it was) is flagged for that hub's members.
 */
async function ruledPairs(db: Db, pairs: { a: { id: string }; b: { id: string } }[]): Promise<Set<string>> {
  if (pairs.length === 0) return new Set();
  const rows = await db.$queryRaw<{ a: string; b: string }[]>`
    SELECT u.a::text AS a, u.b::text AS b FROM unnest(${pairs.map((p) => p.a.id)}::uuid[], ${pairs.map((p) => p.b.id)}::uuid[]) AS u(a, b)
     WHERE EXISTS (SELECT 1 FROM dream_actions d WHERE d.source_memory_ids @> ARRAY[u.a, u.b] AND d.action_type IN ('contradiction', 'merge')
                     AND d.resolution IS DISTINCT FROM ${MEMORY_MOVED_RESOLUTION})`;
  return new Set(rows.map((row) => [row.a, row.b].sort().join(":")));
}

/** Of these memories, those whose archive or filing by a dream was undone. */
async function undoneFor(db: Db, hubId: string, actionType: "archive" | "organize", ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.$queryRaw<{ id: string }[]>`
    SELECT DISTINCT x.id::text AS id FROM dream_actions d CROSS JOIN LATERAL unnest(d.source_memory_ids) AS x(id)
     WHERE d.hub_id = ${hubId}::uuid AND d.action_type = ${actionType} AND d.state = 'undone'
       AND d.source_memory_ids && ${ids}::uuid[] AND x.id = ANY(${ids}::uuid[])`;
  return new Set(rows.map((row) => row.id));
}

/** Contradiction reviews a run flags at most (ENGRAM_DREAM_MAX_REVIEWS_PER_RUN), across its attempts. */
const maxReviewsPerRun = () => positiveIntEnv("ENGRAM_DREAM_MAX_REVIEWS_PER_RUN", 50);

const EXCERPT_CHARS = 280;
const excerpt = (text: string) => (text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS - 3)}…` : text);

async function similarPhase(ctx: BatchContext, hubId: string) {
  const t0 = performance.now();
  const memories = included(ctx.deps.config, await loadMemories(ctx.deps, hubId));
  const t1 = performance.now();
  const { pairs, candidates } = findSimilarPairs(memories, ctx.deps.config);
  const ruled = await ruledPairs(ctx.deps.db, pairs);
  const t2 = performance.now();
  const touched = new Set<string>();
  // Each merge archives a memory: bounded per run as stale archives are, and by the run, not this attempt
  // (a resumed run merged up to the whole bound again). The pairs left over are the next runs'.
  let mergesLeft = 0;
  let mergeRoom = Math.max(0, ctx.deps.config.maxMergesPerRun - (await ctx.deps.db.dreamAction.count({ where: { runId: ctx.runId, actionType: "merge" } })));
  const actions: { type: "merge" | "contradiction"; older: DreamMemory; newer: DreamMemory; cosine: number; reason: string; details: object }[] = [];
  for (const pair of pairs) {
    const key = [pair.a.id, pair.b.id].sort().join(":");
    if (ruled.has(key)) continue;
    const [older, newer] = olderNewer(pair.a, pair.b);
    if (pair.verdict.kind === "duplicate") {
      // The owner turned merging off: the pair stays as it is, and unflagged (it is no contradiction).
      if (!ctx.deps.config.mergeEnabled) continue;
      // One merge per memory per run; chains settle over the next runs.
      if (touched.has(older.id) || touched.has(newer.id)) continue;
      // Past the run's bound: left for the next run, which dueHubs schedules for it (merges_left).
      if (mergeRoom <= 0) {
        mergesLeft += 1;
        continue;
      }
      mergeRoom -= 1;
      touched.add(older.id);
      touched.add(newer.id);
      actions.push({ type: "merge", older, newer, cosine: pair.cosine, reason: `"${older.title}" is a ${pair.verdict.reason} of the newer "${newer.title}"`, details: { archived_id: older.id, kept_id: newer.id } });
    } else {
      actions.push({
        type: "contradiction",
        older,
        newer,
        cosine: pair.cosine,
        reason: `"${older.title}" and "${newer.title}" disagree: ${pair.verdict.reason}`,
        details: { key: pair.verdict.key, values: pair.verdict.values, a: { id: older.id, title: older.title }, b: { id: newer.id, title: newer.title }, options: ["keep_a", "keep_b", "keep_both"] },
      });
    }
  }
  // Contradictions whose side was just merged away are moot.
  const archivedNow = new Set(actions.filter((a) => a.type === "merge").map((a) => a.older.id));
  // Each review is a notification for every owner and admin of the hub: unbounded, a hub with many
  // contradictions and managers got a flood of them in one run. The bound is the run's, not this
  // attempt's (a resumed run flagged up to the whole bound again); the pairs left are the next runs'.
  const [flagged] = await ctx.deps.db.$queryRaw<{ reviews: number }[]>`
    SELECT count(*)::int AS reviews FROM dream_actions WHERE run_id = ${ctx.runId}::uuid AND action_type = 'contradiction'`;
  let reviewRoom = Math.max(0, maxReviewsPerRun() - (flagged?.reviews ?? 0));
  // Recorded in the phase's metrics: a hub with pairs left over is due again without a write (dueHubs),
  // or a run that hit the bound and ended completed left them unflagged until someone wrote there.
  let reviewsLeft = 0;
  const final = actions.filter((a) => {
    if (a.type === "merge") return true;
    if (archivedNow.has(a.older.id) || archivedNow.has(a.newer.id)) return false;
    if (reviewRoom <= 0) {
      reviewsLeft += 1;
      return false;
    }
    reviewRoom -= 1;
    return true;
  });
  // Enough of each side to tell whether it is longer than its excerpt, and no more.
  const contents = await ctx.deps.db.$queryRaw<{ id: string; content: string }[]>`
    SELECT id::text AS id, left(content, ${EXCERPT_CHARS + 1}::int) AS content FROM memories
     WHERE id = ANY(${final.filter((a) => a.type === "contradiction").flatMap((a) => [a.older.id, a.newer.id])}::uuid[])`;
  const contentOf = new Map(contents.map((c) => [c.id, c.content]));
  const titleOf = new Map(final.flatMap((a) => [[a.older.id, a.older.title] as const, [a.newer.id, a.newer.title] as const]));
  // Gone, its purge took the run's row too: a lease lost like any other (see runRow), not a failure.
  const hub = await ctx.deps.db.hub.findUnique({ where: { id: hubId }, select: { id: true, name: true } });
  if (!hub) throw new LostLeaseError(`dream run ${ctx.runId}: its hub is gone (deleted); no longer held by ${ctx.owner}`);
  const rewrites = await rewriteMerges(ctx, final.filter((a) => a.type === "merge"));
  const rewritten: string[] = [];
  // What the batches wrote: a pair a member changed since the scan is written by none of them, and
  // counted as an action or left out of the rest of the run (its older side still active), it made the
  // metrics claim merges never made and the organize step skip a memory it should file.
  const mergedAway: string[] = [];
  let written = 0;
  for (const batch of chunked(final, ctx.deps.config.batchSize)) {
    await commitBatch(ctx, async (tx, now) => {
      // Every memory of the batch, locked in id order before the first write (see lockMemoryRows): a
      // rewrite takes the hub's counter, and locking the next memory while holding it deadlocked with
      // an edit of that memory, which locks the memory first and the counter after.
      const sides = batch.flatMap((a) => [a.older, a.newer]);
      await lockMemoryRows(tx, sides.map((m) => m.id), [hubId]);
      // And every counter its rewrites change, sorted in one statement (see lockUsageCounters): rewritten
      // one at a time, they took their owners' counters in the actions' order, and a hub's deletion or a
      // batch move taking the same users' counters sorted deadlocked with the batch.
      const toRewrite = batch.flatMap((a) => (a.type === "merge" && rewrites.has(a.newer.id) && "content" in rewrites.get(a.newer.id)! ? [a.newer.id] : []));
      const ownerOf = new Map<string, string>();
      if (toRewrite.length) {
        const keptRows = await tx.memory.findMany({ where: { id: { in: toRewrite }, hubId }, select: { id: true, ownerId: true, topicId: true } });
        for (const m of keptRows) ownerOf.set(m.id, m.ownerId);
        await lockUsageCounters(tx, [
          { scope: "hub", id: hubId },
          ...keptRows.flatMap((m): UsageCounterKey[] => [m.topicId ? { scope: "topic", id: m.topicId } : { scope: "inbox", id: hubId }, { scope: "user", id: m.ownerId }]),
        ]);
      }
      // Only pairs whose both sides are as the scan judged them, held so until commit: still in this hub
      // (one moved to another hub since is not this run's to write), still active (a newer side a
      // member archived would leave the older superseded by a memory out of use), their title and
      // content unchanged (a member's rewrite since is no longer the duplicate or contradiction found).
      const scannedVersion = new Map(
        (
          await tx.$queryRaw<{ id: string; version: number }[]>`
            SELECT m.id::text AS id, m.version FROM memories m JOIN unnest(${sides.map((m) => m.id)}::uuid[], ${sides.map((m) => m.contentChangedAt)}::timestamptz[]) AS u(id, changed) ON m.id = u.id
             WHERE m.hub_id = ${hubId}::uuid AND m.state = 'active' AND m.content_changed_at = u.changed
               AND m.kind <> ALL(${ctx.deps.config.excludedKinds}::text[])`
        ).map((row) => [row.id, row.version]),
      );
      const asScanned = new Set(scannedVersion.keys());
      // Each side of a review as the run read it, for the decision to tell a member's edit since by the
      // memory's own stamps: its created_at is the worker's clock, another machine's than the writers'.
      const asRead = (m: DreamMemory) => ({ id: m.id, title: m.title, excerpt: excerpt(contentOf.get(m.id) ?? ""), version: scannedVersion.get(m.id), content_changed_at: m.contentChangedAt.toISOString() });
      const rows = [];
      const archived = await archiveSuperseded(
        tx,
        batch.filter((a) => a.type === "merge" && asScanned.has(a.older.id) && asScanned.has(a.newer.id)).map((a) => ({ older: a.older.id, newer: a.newer.id })),
        now,
      );
      const kept: string[] = [];
      for (const action of batch) {
        if (action.type === "merge" && !archived.has(action.older.id)) continue;
        // The excerpts were read before the batches: a side deleted (or moved away) since is not here to
        // lock, and a review of it would only quote what its delete removed.
        if (action.type === "contradiction" && !(asScanned.has(action.older.id) && asScanned.has(action.newer.id))) continue;
        let rewrite: object = {};
        let writtenAt = now;
        const merged = action.type === "merge" ? rewrites.get(action.newer.id) : undefined;
        const toWrite = merged && "content" in merged ? merged : undefined;
        // Only over the content the model read (the row is locked above): an edit since then wins and the
        // merge keeps the newer as it is. Checked first: the quota's growth is measured against the text
        // the model read, and an edited memory was logged as skipped for a quota it was never held to.
        // The kept text's own time is read with it, for an undo to put back: the rewrite stamps it as changed now.
        const asModelRead = toWrite && (await tx.memory.findFirst({ where: { id: action.newer.id, hubId, state: "active", contentHash: toWrite.originalHash }, select: { contentChangedAt: true } }));
        // The merged text may be longer than the kept memory's (up to both texts together), and the archived
        // side still counts: the hub's quota holds for it as for an edit, and so does the owner's while
        // they are a member. Past one, the merge keeps the newer as it is, as without a model.
        const growth = toWrite ? Buffer.byteLength(toWrite.content, "utf8") - Buffer.byteLength(toWrite.original, "utf8") : 0;
        const fits = async () => growth <= 0 || !ownerOf.has(action.newer.id) || (await fitsStorageQuota(tx, { ownerId: ownerOf.get(action.newer.id)!, hubId, bytes: growth, memories: 0 }));
        if (toWrite && !asModelRead) {
          rewrite = { rewritten: false, rewrite_skipped: "the kept memory changed while the model merged it", model: toWrite.model };
        } else if (toWrite && !(await fits())) {
          rewrite = { rewritten: false, rewrite_skipped: "the merged text would take the hub or the memory's owner past a storage quota", model: toWrite.model };
        } else if (toWrite) {
          const hash = contentHash(toWrite.content);
          const changed = await tx.memory.updateMany({
            where: { id: action.newer.id, hubId, state: "active", contentHash: toWrite.originalHash },
            // summary: the kept memory's own, which does not cover the merged text; the summarise step writes it anew.
            data: { content: toWrite.content, contentHash: hash, version: { increment: 1 }, processingStatus: "pending", processingAttempts: 0, processingError: null, summary: "", updatedAt: now },
          });
          if (changed.count === 1) {
            kept.push(action.newer.id);
            // The action carries the updated_at written, which is past `now` when the stored one was not behind it (see dueHubs).
            writtenAt = (await tx.memory.findUniqueOrThrow({ where: { id: action.newer.id }, select: { updatedAt: true } })).updatedAt;
            rewrite = {
              rewritten: true,
              model: toWrite.model,
              original_content: toWrite.original,
              original_content_hash: toWrite.originalHash,
              original_content_changed_at: asModelRead?.contentChangedAt.toISOString(),
              merged_content_hash: hash,
            };
          } else rewrite = { rewritten: false, rewrite_skipped: "the kept memory changed while the model merged it", model: toWrite.model };
        } else if (merged && "skipped" in merged) rewrite = { rewritten: false, rewrite_skipped: merged.skipped, ...(merged.model && { model: merged.model }) };
        const details =
          action.type === "contradiction"
            ? { ...action.details, a: asRead(action.older), b: asRead(action.newer) }
            : // What the archive wrote: an undo splits the merge only while the memory still has it (see undoDreamAction).
              { ...action.details, ...rewrite, archived_updated_at: archived.get(action.older.id)!.toISOString() };
        rows.push({
          id: newId(now.getTime()),
          runId: ctx.runId,
          hubId,
          actionType: action.type,
          state: action.type === "merge" ? "applied" : "pending_review",
          sourceMemoryIds: [action.older.id, action.newer.id],
          resultMemoryId: action.type === "merge" ? action.newer.id : null,
          reason: action.reason,
          similarity: Math.round(action.cosine * 1000) / 1000,
          details,
          createdAt: writtenAt,
        });
      }
      if (rows.length) await tx.dreamAction.createMany({ data: rows });
      written += rows.length;
      mergedAway.push(...archived.keys());
      // Last in the transaction: the notifications' events hold a lock until commit.
      const reviews = rows.flatMap((row) =>
        row.actionType === "contradiction"
          ? [{ id: row.id, runId: row.runId, hubId, reason: row.reason, similarity: row.similarity, a: { id: row.sourceMemoryIds[0]!, title: titleOf.get(row.sourceMemoryIds[0]!) ?? "" }, b: { id: row.sourceMemoryIds[1]!, title: titleOf.get(row.sourceMemoryIds[1]!) ?? "" } }]
          : [],
      );
      await onContradictionsFlagged(tx, hub, reviews, now);
      // The archived sides too, as a member's archive is announced: without, a client keeping its list by
      // the stream (or a webhook) still showed them active.
      const announced = [...archived.keys(), ...kept];
      if (announced.length) await emitEvent(tx, announced.map((id) => ({ type: "memory.updated", hubId, actorId: null, entityId: id })));
      rewritten.push(...kept);
    });
  }
  // A rewritten kept memory has an edit pending now: like any such memory (readMemories), the rest of
  // the run leaves it out rather than file it by its old text's vectors, as a resumed run would.
  forget(ctx.deps, [...mergedAway, ...rewritten]);
  // Rewritten memories are chunked and embedded again, like any content edit.
  for (const id of rewritten) afterMemoryWrite({ id, hubId, processingStatus: "pending" });
  return { rewritten: rewritten.length, scanned: memories.length, candidates, attempted: pairs.length, actions: written, reviews_left: reviewsLeft, merges_left: mergesLeft, embedded: memories.filter((m) => m.embedding).length, load_ms: Math.round(t1 - t0), compare_ms: Math.round(t2 - t1), write_ms: Math.round(performance.now() - t2) };
}

/** `model`: the model asked (a skip before asking names none). */
type MergeRewrite = { content: string; original: string; originalHash: string; model: string } | { skipped: string; model?: string };

/**
 * With a chat model configured, each merge's kept memory is rewritten to hold
 * both memories (issue 15). Bounded: both sides must fit the prompt whole, at
 * most `maxModelCallsPerRun` calls, none after half the run's time budget,
 * each with its own timeout; any failure keeps the newer memory as it is.
 */
async function rewriteMerges(ctx: BatchContext, merges: { older: DreamMemory; newer: DreamMemory }[]): Promise<Map<string, MergeRewrite>> {
  const out = new Map<string, MergeRewrite>();
  const model = merges.length ? chatModel() : null;
  if (!model) return out;
  const name = process.env.ENGRAM_CHAT_MODEL ?? "chat";
  const now = ctx.deps.now ?? (() => new Date());
  for (let start = 0; start < merges.length; start += 4) {
    // Stopping: the next batch ends the run (commitBatch), so further answers would only be thrown away.
    if (now().getTime() - ctx.startedAt > ctx.deps.config.maxRunMs / 2 || stopping(ctx.deps)) break;
    // Counted before the pairs are read: a pair too long to ask takes its place in the bound too, so the
    // run reads no more pairs than it may try.
    const group = merges.slice(start, start + (await countModelCalls(ctx, Math.min(4, merges.length - start))));
    if (group.length === 0) break;
    // Only the pairs the model is called for, and of each side one character past what fits the
    // prompt: enough to tell a side too long to rewrite (contents go up to megabytes, pairs to thousands).
    const rows = await ctx.deps.db.$queryRaw<{ id: string; title: string; content: string; contentType: string; contentHash: string }[]>`
      SELECT id::text AS id, title, left(content, ${MERGE_MAX_INPUT_CHARS + 1}::int) AS content, content_type AS "contentType", content_hash AS "contentHash"
        FROM memories WHERE id = ANY(${group.flatMap((m) => [m.older.id, m.newer.id])}::uuid[])`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    await Promise.all(
      group.map(async ({ older, newer }) => {
        const a = byId.get(older.id);
        const b = byId.get(newer.id);
        if (!a || !b) return;
        if (a.content.length > MERGE_MAX_INPUT_CHARS || b.content.length > MERGE_MAX_INPUT_CHARS) {
          out.set(newer.id, { skipped: `too long to rewrite (over ${MERGE_MAX_INPUT_CHARS} characters)` });
          return;
        }
        try {
          const content = await mergeWithModel(model, a, b, ctx.deps.signal);
          out.set(newer.id, content ? { content, original: b.content, originalHash: b.contentHash, model: name } : { skipped: "the model's merge was empty or longer than both memories", model: name });
        } catch (error) {
          // Cancelled by the stop: no failure of the model's, and the next batch ends the run anyway.
          if (stopping(ctx.deps)) return;
          const message = error instanceof Error ? error.message : String(error);
          console.error(`[engram] dream run ${ctx.runId}: chat model merge failed; keeping the newer memory: ${message}`);
          // The provider's own error text (its address, an echoed key, its quota) is the operator's, not
          // every hub admin's who reads the action: the log has it under the run id, as ask and chat do.
          out.set(newer.id, { skipped: `chat model failed (details in the server log, dream run ${ctx.runId})`, model: name });
        }
      }),
    );
  }
  return out;
}

/**
 * Takes up to `wanted` of the run's model calls (pairs to try), in a statement of its own before they
 * are asked, and returns how many it got. The bound is the run's, not this attempt's, and counted before asking: the
 * similar step asks for every merge before its first batch saves one, so counted from the saved merge
 * actions, the calls of an attempt that crashed, stopped or was retried before that save were lost, and
 * each attempt asked up to the whole bound again (also calls whose pair changed before the write).
 */
async function countModelCalls(ctx: BatchContext, wanted: number): Promise<number> {
  if (wanted === 0) return 0;
  const rows = await ctx.deps.db.$queryRaw<{ granted: number }[]>`
    UPDATE dream_runs r SET model_calls = r.model_calls + g.granted
      FROM (SELECT id, LEAST(${wanted}::int, GREATEST(0, ${ctx.deps.config.maxModelCallsPerRun}::int - model_calls)) AS granted
              FROM dream_runs WHERE id = ${ctx.runId}::uuid FOR UPDATE) g
     WHERE r.id = g.id AND ${heldSql(ctx.owner, ctx.deps.attempt)}
     RETURNING g.granted`;
  if (rows.length === 0) throw new LostLeaseError(`dream run ${ctx.runId} is no longer held by ${ctx.owner}`);
  return rows[0]!.granted;
}

async function stalePhase(ctx: BatchContext, hubId: string) {
  const now = (ctx.deps.now ?? (() => new Date()))();
  const cutoff = new Date(now.getTime() - ctx.deps.config.staleDays * 86_400_000);
  // Stale is never read and its text unchanged: content_changed_at, not updated_at, which filing into a
  // topic (this run's organize step among them), tagging or a move also set and leave the text as old.
  // A memory a dream archived as stale and that is active now was restored by a member (the undo, a
  // PATCH of its state, a batch update): that decision wins, and no later run archives it as stale again.
  // A restore leaves content_changed_at as old as before, so judged by the clock alone the very next run
  // archived it again. Those memories are left out in the query, so the run's bound holds however many,
  // whichever hub's run archived it (the restore follows the memory through a move).
  // The bound is the run's, not this attempt's: a run resumed after a stale batch (a crash, an Inngest
  // step's retry) archived up to the whole bound again.
  const room = ctx.deps.config.maxStalePerRun - (await ctx.deps.db.dreamAction.count({ where: { runId: ctx.runId, actionType: "archive" } }));
  if (room <= 0) return { candidates: 0, actions: 0 };
  const stale = await ctx.deps.db.$queryRaw<{ id: string; title: string; updatedAt: Date; contentChangedAt: Date }[]>`
    SELECT m.id::text AS id, m.title, m.updated_at AS "updatedAt", m.content_changed_at AS "contentChangedAt" FROM memories m
     WHERE m.hub_id = ${hubId}::uuid AND m.state = 'active' AND m.access_count = 0 AND m.last_accessed_at IS NULL AND m.stability <> 'stable'
       AND m.content_changed_at < ${cutoff} AND m.created_at < ${cutoff} AND m.kind <> ALL(${ctx.deps.config.excludedKinds}::text[])
       AND NOT EXISTS (SELECT 1 FROM dream_actions d WHERE d.action_type = 'archive' AND d.source_memory_ids @> ARRAY[m.id])
     ORDER BY m.content_changed_at, m.id LIMIT ${room}`;
  // Only what was archived counts, and only it leaves the rest of the run: one spared at write time is
  // still active, and the organize step files it as any other.
  const archivedIds: string[] = [];
  for (const batch of chunked(stale, ctx.deps.config.batchSize)) {
    await commitBatch(ctx, async (tx, at) => {
      // Only the memories still in this hub are locked, and only those are written: a move to another hub
      // since the scan leaves content_changed_at as it was, and the archive by id alone archived the
      // memory in its new hub and recorded it in this one.
      const locked = await lockMemoryRows(tx, batch.map((row) => row.id), [hubId]);
      // Only rows still stale at write time (a read, an edit or a member marking it stable since the scan saves them).
      const still = await tx.memory.findMany({
        where: { id: { in: locked }, hubId, state: "active", accessCount: 0, lastAccessedAt: null, stability: { not: "stable" }, contentChangedAt: { lt: cutoff }, kind: { notIn: [...ctx.deps.config.excludedKinds] } },
        select: { id: true },
      });
      const keep = new Set(still.map((row) => row.id));
      const archive = batch.filter((row) => keep.has(row.id));
      if (archive.length === 0) return;
      const written = await tx.memory.updateManyAndReturn({ where: { id: { in: archive.map((row) => row.id) }, hubId }, data: { state: "archived", updatedAt: at }, select: { id: true, updatedAt: true } });
      const archivedAt = new Map(written.map((row) => [row.id, row.updatedAt]));
      archivedIds.push(...written.map((row) => row.id));
      await tx.dreamAction.createMany({
        data: archive.map((row) => ({
          id: newId(at.getTime()),
          runId: ctx.runId,
          hubId,
          actionType: "archive",
          state: "applied",
          sourceMemoryIds: [row.id],
          reason: `"${row.title}" was never read and has not changed for ${Math.floor((at.getTime() - row.contentChangedAt.getTime()) / 86_400_000)} days`,
          // What the archive wrote (the database may have moved it past `at`): an undo restores the memory
          // only while it still is (see undoDreamAction).
          details: { previous_updated_at: row.updatedAt.toISOString(), archived_updated_at: (archivedAt.get(row.id) ?? at).toISOString() },
          createdAt: at,
        })),
      });
      // Last, as emitEvent asks: each archive announced, as a member's is.
      await emitEvent(tx, written.map((row) => ({ type: "memory.updated" as const, hubId, actorId: null, entityId: row.id })));
    });
  }
  forget(ctx.deps, archivedIds);
  return { candidates: stale.length, actions: archivedIds.length };
}

async function organizePhase(ctx: BatchContext, hubId: string) {
  const t0 = performance.now();
  const memories = await loadMemories(ctx.deps, hubId);
  const t1 = performance.now();
  const undone = await undoneFor(ctx.deps.db, hubId, "organize", memories.flatMap((m) => (m.topicId ? [] : [m.id])));
  // Archived topics count toward the hub's limit but take no new memories (they are out of the tree).
  // So do topics being deleted, which are gone to everyone else: their names are free (the sibling-name
  // index leaves them out), and a memory filed into one would be refused (assignTopics).
  const hubTopics = await ctx.deps.db.topic.findMany({ where: { hubId }, select: { id: true, name: true, archivedAt: true, deletingAt: true } });
  const allTopics = hubTopics.filter((t) => t.deletingAt === null);
  const topics = allTopics.filter((t) => t.archivedAt === null).map(({ id, name }) => ({ id, name }));
  const df = new Map<string, number>();
  for (const m of memories) for (const w of m.features.words) df.set(w, (df.get(w) ?? 0) + 1);
  const byTopic = new Map<string, Float32Array[]>();
  for (const m of memories) if (m.topicId && m.embedding) byTopic.set(m.topicId, [...(byTopic.get(m.topicId) ?? []), m.embedding]);
  const excluded = new Set(ctx.deps.config.excludedKinds);
  const unsorted = memories.flatMap((m) => (!m.topicId && m.embedding && !undone.has(m.id) && !excluded.has(m.kind) ? [{ id: m.id, embedding: m.embedding, words: m.features.words }] : []));
  // The bound on new topics is the run's, not this attempt's: a run resumed after an organize batch (a
  // crash, an Inngest step's retry) made up to the whole bound again.
  const madeByRun = await ctx.deps.db.dreamAction.count({ where: { runId: ctx.runId, actionType: "organize", createdTopic: true } });
  const plan = organizeMemories(
    { unsorted, topics: topics.map((t) => ({ ...t, embeddings: byTopic.get(t.id) ?? [] })), takenNames: allTopics.map((t) => t.name), df, hubSize: memories.length, topicRoom: Math.max(0, MAX_TOPICS_PER_HUB - hubTopics.length) },
    { ...ctx.deps.config, maxNewTopicsPerRun: Math.max(0, ctx.deps.config.maxNewTopicsPerRun - madeByRun) },
  );
  await nameTopics(ctx, plan.create, memories, allTopics);
  // Stopped while the model named them: the names it did not give are not the run's to keep.
  if (stopping(ctx.deps)) throw new StoppedError(`dream run ${ctx.runId}: the worker is stopping`);
  const t2 = performance.now();
  const topicName = new Map(topics.map((t) => [t.id, t.name]));
  type Move = { memoryId: string; topicId: string | null; newTopic?: string; first?: boolean };
  const moves: Move[] = [...plan.assign].map(([memoryId, topicId]) => ({ memoryId, topicId }));
  for (const created of plan.create) created.memoryIds.forEach((memoryId, i) => moves.push({ memoryId, topicId: null, newTopic: created.name, first: i === 0 }));
  const createdIds = new Map<string, string>();
  const changedAt = new Map(memories.map((m) => [m.id, m.contentChangedAt]));
  // What the batches filed and created, not what the plan asked for: a memory changed since the scan,
  // a cluster without room for its topic or one a member's topic took are counted by neither.
  let filed = 0;
  let topicsCreated = 0;
  // Organize writes are cheap per row: larger batches, fewer transactions.
  for (const batch of chunked(moves, ctx.deps.config.batchSize * 5)) {
    await commitBatch(ctx, async (tx, now) => {
      // New topics count against the hub's limit under the lock a topic created through the API takes
      // (before the memory rows, in its order): the room was read when the plan was made, and topics
      // created since (by members, while the run named its own) take it first.
      // Filing alone takes it shared, as a filing through the API does: an undo that empties a dream's
      // topic deletes it under that lock, and a batch filing into it without the lock had its write
      // refused by the foreign key once the undo committed (the whole run failed).
      let room = 0;
      if (batch.some((move) => move.newTopic && !createdIds.has(move.newTopic))) {
        await lockForTransaction(tx, topicsLockKey(hubId));
        room = MAX_TOPICS_PER_HUB - (await tx.topic.count({ where: { hubId } }));
      } else await lockForTransaction(tx, { shared: topicsLockKey(hubId) });
      // In id order, as every multi-memory write does: the topic assignment's single UPDATE locks its
      // rows in whatever order its plan reads them.
      // A memory moved to another hub since the scan is not locked (nor filed into this hub's topic).
      const locked = new Set(await lockMemoryRows(tx, batch.map((move) => move.memoryId), [hubId]));
      // The clusters of this batch with a memory still to file (unsorted, active, its text as scanned),
      // read under the row locks so the filing below finds them so. A topic made for a cluster with none
      // was removed again at the end of the batch, but had taken the batch's room under the hub's limit
      // first, and at the limit a later cluster of the batch waited for the next run.
      const pending = batch.filter((move) => move.newTopic && !createdIds.has(move.newTopic) && locked.has(move.memoryId));
      const fileable = pending.length
        ? await tx.$queryRaw<{ id: string }[]>`
            SELECT m.id::text AS id FROM memories m JOIN unnest(${pending.map((move) => move.memoryId)}::uuid[], ${pending.map((move) => changedAt.get(move.memoryId)!)}::timestamptz[]) AS u(id, changed) ON m.id = u.id
             WHERE m.hub_id = ${hubId}::uuid AND m.state = 'active' AND m.topic_id IS NULL AND m.content_changed_at = u.changed`
        : [];
      const stillFiled = new Set(fileable.map((row) => row.id));
      const wanted = new Set(pending.flatMap((move) => (stillFiled.has(move.memoryId) ? [move.newTopic!] : [])));
      const created = new Set<string>();
      const newTopics: string[] = [];
      for (const move of batch) {
        if (!move.newTopic || createdIds.has(move.newTopic) || !wanted.has(move.newTopic)) continue;
        // Names are unique among siblings whatever their case, archived or not (the index on lower(name)):
        // a top-level topic of that name made since the plan (by a member, in any case) takes the
        // cluster; an archived one takes no memories, so the new topic gets a free name beside it.
        const [same] = await tx.$queryRaw<{ id: string; name: string; archived: boolean }[]>`
          SELECT id::text AS id, name, archived_at IS NOT NULL AS archived FROM topics
           WHERE hub_id = ${hubId}::uuid AND parent_id IS NULL AND deleting_at IS NULL AND lower(name) = lower(${move.newTopic}) LIMIT 1`;
        const existing = same && !same.archived ? same : undefined;
        // No room: the cluster stays unsorted (a later run files it once there is room).
        if (!existing && room <= 0) continue;
        const topicId = existing?.id ?? newId(now.getTime());
        let name = existing?.name ?? move.newTopic;
        if (!existing) {
          if (same) {
            const roots = await tx.topic.findMany({ where: { hubId, parentId: null, deletingAt: null }, select: { name: true } });
            name = uniqueName(move.newTopic, new Set(roots.map((t) => t.name.toLowerCase())));
          }
          // Last among the top-level topics, as a topic created through the API goes (HubTopics.nextPosition,
          // archived ones counted): the schema's default 0 put every dream's topic first.
          const [last] = await tx.$queryRaw<{ position: number | null }[]>`
            SELECT max(position) AS position FROM topics WHERE hub_id = ${hubId}::uuid AND parent_id IS NULL AND deleting_at IS NULL`;
          const position = last?.position == null ? 0 : Math.min(MAX_POSITION, last.position + 1);
          await tx.topic.create({ data: { id: topicId, hubId, name, position, createdBy: null, createdAt: now, updatedAt: now } });
          created.add(topicId);
          newTopics.push(topicId);
          room -= 1;
        }
        createdIds.set(move.newTopic, topicId);
        topicName.set(topicId, name);
      }
      const placed = batch.filter((move) => locked.has(move.memoryId) && (!move.newTopic || createdIds.has(move.newTopic)));
      // Only memories still unsorted and active at write time move (an edit since the scan wins).
      const target = (move: Move) => (move.newTopic ? createdIds.get(move.newTopic)! : move.topicId!);
      const moved = await assignTopics(tx, placed.map((move) => ({ memoryId: move.memoryId, topicId: target(move), contentChangedAt: changedAt.get(move.memoryId)! })), now, ctx.deps.config.excludedKinds);
      const actions = [];
      for (const move of placed) {
        const writtenAt = moved.get(move.memoryId);
        if (!writtenAt) continue;
        const topicId = target(move);
        actions.push({
          writtenAt,
          id: newId(now.getTime()),
          memoryId: move.memoryId,
          topicId,
          topicName: topicName.get(topicId) ?? "",
          createdTopic: created.delete(topicId),
          reason: move.newTopic ? `grouped with similar memories into the new topic "${topicName.get(topicId)}"` : `closest to the topic "${topicName.get(topicId)}"`,
        });
      }
      await insertOrganizeActions(tx, ctx.runId, hubId, actions);
      // A topic made in this batch that no filing claimed would stay empty and recorded by no action, so
      // no undo could remove it: it goes, and a later batch of the same cluster makes it afresh.
      if (created.size > 0) {
        await tx.topic.deleteMany({ where: { id: { in: [...created] } } });
        for (const [cluster, id] of createdIds) if (created.has(id)) createdIds.delete(cluster);
      }
      const kept = newTopics.filter((id) => !created.has(id));
      filed += actions.length;
      topicsCreated += kept.length;
      // Last, as emitEvent asks. A topic created through the API is announced, and so is the undo that
      // deletes a dream's: without this a client keeping the tree by the stream never heard of it.
      // So is each memory filed, as a filing through a topic's endpoint is (its topic_id and updated_at moved).
      await emitEvent(tx, [
        ...kept.map((id) => ({ type: "topic.changed" as const, hubId, actorId: null, entityId: id })),
        ...actions.map((action) => ({ type: "memory.updated" as const, hubId, actorId: null, entityId: action.memoryId })),
      ]);
    });
  }
  return { candidates: unsorted.length, actions: filed, topics_created: topicsCreated, load_ms: Math.round(t1 - t0), cluster_ms: Math.round(t2 - t1), write_ms: Math.round(performance.now() - t2) };
}

/**
 * With a chat model configured, new topics are named by it from their
 * memories' titles (the distinctive-terms name is the fallback on any failure).
 * The calls are the run's model calls (ENGRAM_DREAM_MAX_MODEL_CALLS), counted before asking as the
 * merges' are: uncounted, every attempt of the organize step (a crash, an Inngest step's retry) asked
 * for every name again. A topic past the bound keeps its distinctive-terms name.
 */
async function nameTopics(ctx: BatchContext, create: { name: string; memoryIds: string[] }[], memories: DreamMemory[], topics: { name: string }[]): Promise<void> {
  const model = create.length ? chatModel() : null;
  if (!model) return;
  const signal = ctx.deps.signal;
  const titleOf = new Map(memories.map((m) => [m.id, m.title]));
  const taken = new Set(topics.map((t) => t.name.toLowerCase()));
  const granted = stopping(ctx.deps) ? 0 : await countModelCalls(ctx, create.length);
  const named = await Promise.all(
    create.slice(0, granted).map((topic) =>
      nameTopicWithModel(model, topic.memoryIds.map((id) => titleOf.get(id) ?? "").filter(Boolean), topic.name, signal).catch((error: unknown) => {
        if (signal?.aborted) return null;
        console.error(`[engram] dream: chat model topic name failed; keeping "${topic.name}": ${error instanceof Error ? error.message : String(error)}`);
        return null;
      }),
    ),
  );
  // Names stay unique within the hub and this run, whoever chose them.
  create.forEach((topic, i) => {
    topic.name = uniqueName(named[i] ?? topic.name, taken);
    taken.add(topic.name.toLowerCase());
  });
}

/** The first SECTION_LINES actions of one type of the run, share-locked. */
async function listedActions(tx: Tx, runId: string, actionType: string) {
  const ids = await tx.$queryRaw<{ id: string }[]>`
    SELECT id::text AS id FROM dream_actions WHERE run_id = ${runId}::uuid AND action_type = ${actionType}
     ORDER BY created_at, id LIMIT ${SECTION_LINES} FOR SHARE`;
  return tx.dreamAction.findMany({ where: { id: { in: ids.map((row) => row.id) } }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
}

/** Counts, the markdown report, the terminal status and the dream.completed event. */
export async function finishDreamRun(deps: DreamDeps, runId: string, owner: string, timedOut: boolean): Promise<string> {
  const now = (deps.now ?? (() => new Date()))();
  const run = await runRow(deps.db, runId, owner);
  const hub = await deps.db.hub.findUnique({ where: { id: run.hubId }, select: { name: true } });
  // Counted in the database and listed per type: a large hub's run has thousands of actions, and the
  // report counts every one but lists only the first of each type.
  const counts = (await runCounts(deps.db, [runId])).get(runId) ?? ZERO_COUNTS;
  const status = timedOut ? "partial_failed" : "completed";
  const durationMs = now.getTime() - (run.startedAt ?? run.createdAt).getTime();
  const done = await deps.db.$transaction(async (tx) => {
    const held = await tx.$queryRaw<unknown[]>`
      SELECT 1 FROM dream_runs r WHERE r.id = ${runId}::uuid AND ${heldSql(owner, deps.attempt)} FOR UPDATE`;
    if (held.length === 0) return false;
    // The listed actions are read here, under share locks, not before the transaction: a hard delete
    // rewriting one's reason (drop-memory-copies.ts) commits first and the report quotes the new
    // reason; read before, the report quoted the deleted memory's title, and that delete had found
    // the run still running, with no report to rewrite.
    const listed = [];
    for (const actionType of ACTION_TYPES) listed.push(...(await listedActions(tx, runId, actionType)));
    const report = buildDreamReport({ hubName: hub?.name ?? "hub", scanned: run.memoriesScanned, durationMs, counts, listed, timedOut });
    await tx.dreamRun.update({
      where: { id: runId },
      data: { status, phase: timedOut ? run.phase : "done", report, finishedAt: now, heartbeatAt: now, ...(timedOut && { error: `stopped after the ${Math.round(deps.config.maxRunMs / 1000)} s budget; the next run continues` }) },
    });
    // Through emitEvent, as every event: its NOTIFY reaches open streams, and its lock keeps seq in commit order.
    await emitEvent(tx, { type: "dream.completed", hubId: run.hubId, actorId: run.triggeredBy, entityId: runId });
    return true;
  });
  if (!done) throw new LostLeaseError(`dream run ${runId} is no longer held by ${owner}`);
  // The hub's custom boards are answered again by the worker, each on its own (kickBoardsAfterDream, the
  // Inngest function's board steps): awaited here, they held the worker for up to ten model answers.
  return status;
}

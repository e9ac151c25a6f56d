import { APICallError, RetryError } from "ai";
import type { Db } from "@/lib/db/database.ts";
import { failMemory, PROCESSING_STEPS, StaleJobError, type MemoryVersion, type StepContext } from "./processing-steps.ts";
import { retryDelayMs, type ProcessingConfig } from "./processing-config.ts";

export interface Claim {
  memory: MemoryVersion;
  /** 1-based attempt number of this run. */
  attempt: number;
}

export interface ClaimOptions {
  now: Date;
  /** `running` rows started before this are orphans of a dead worker and may be taken over. */
  staleBefore: Date;
  maxAttempts: number;
  retryBaseMs: number;
}

/**
 * Takes a pending (or orphaned running) memory for processing: status
 * `running`, attempts +1, started now. Optimistic: the update only succeeds if
 * the row is exactly as read, so two workers never both claim one version.
 * A memory that already used all its attempts (e.g. it crashed the process
 * each time) is marked failed instead. Returns null when there is nothing to do.
 */
export async function claimMemory(db: Db, id: string, options: ClaimOptions): Promise<Claim | null> {
  // Not in a hub marked deleted (an event or a retry timer set before the delete still names the memory).
  const row = await db.memory.findFirst({
    where: { id, hub: { deletedAt: null } },
    select: {
      id: true,
      hubId: true,
      version: true,
      contentHash: true,
      processingStatus: true,
      processingAttempts: true,
      processingStartedAt: true,
      processingError: true,
    },
  });
  if (!row) return null;
  const orphaned = row.processingStatus === "running" && (!row.processingStartedAt || row.processingStartedAt < options.staleBefore);
  if (row.processingStatus !== "pending" && !orphaned) return null;
  if (row.processingStatus === "pending" && row.processingAttempts > 0 && row.processingStartedAt) {
    // Waiting out the backoff of a failed attempt; the retry timer or the sweeper comes back later.
    const due = row.processingStartedAt.getTime() + retryDelayMs(row.processingAttempts, options.retryBaseMs, () => 0);
    if (due > options.now.getTime()) return null;
  }
  const memory: MemoryVersion = { id: row.id, hubId: row.hubId, version: row.version, contentHash: row.contentHash };
  if (row.processingAttempts >= options.maxAttempts) {
    const reason = orphaned
      ? `processing was interrupted ${row.processingAttempts} times (the worker stopped mid-job)`
      : (row.processingError ?? `gave up after ${row.processingAttempts} attempts`);
    // Fenced like the claim below: two sweeps giving up at once would each fail and notify, and an
    // owner whose lease renewal landed after the read is still at work on its last attempt.
    const asRead = { processingStatus: row.processingStatus, processingAttempts: row.processingAttempts, processingStartedAt: row.processingStartedAt };
    await failMemory({ db, memory, now: () => options.now }, reason, { indexed: false, asRead });
    return null;
  }
  const { count } = await db.memory.updateMany({
    where: {
      id: row.id,
      version: row.version,
      contentHash: row.contentHash,
      processingStatus: row.processingStatus,
      processingAttempts: row.processingAttempts,
      // A takeover loses to a lease renewal that landed after the read (job-lease.ts).
      ...(orphaned && { processingStartedAt: row.processingStartedAt }),
    },
    data: { processingStatus: "running", processingStartedAt: options.now, processingAttempts: { increment: 1 } },
  });
  return count === 1 ? { memory, attempt: row.processingAttempts + 1 } : null;
}

export type JobOutcome =
  | { status: "done" }
  | { status: "stale" }
  | { status: "retry"; delayMs: number; error: string }
  | { status: "failed"; error: string };

/** Records a failed attempt: back to `pending` with the reason (retried after a backoff), or `failed` for good. */
export async function recordFailure(
  ctx: StepContext,
  attempt: number,
  error: unknown,
  config: Pick<ProcessingConfig, "maxAttempts" | "retryBaseMs">,
  indexed: boolean,
): Promise<JobOutcome> {
  const message = describeError(error);
  console.error(`[engram] processing: memory ${ctx.memory.id} attempt ${attempt} failed`, error);
  // Only while this attempt still holds the memory (attempts is the fencing token, job-lease.ts): one
  // whose lease lapsed and was taken over must not put the owner's run back to pending or fail it.
  if (attempt >= config.maxAttempts || isPermanentError(error)) {
    if (!(await failMemory(ctx, message, { indexed, attempt }))) return { status: "stale" };
    return { status: "failed", error: message };
  }
  const { count } = await ctx.db.memory.updateMany({
    where: { id: ctx.memory.id, version: ctx.memory.version, contentHash: ctx.memory.contentHash, processingStatus: "running", processingAttempts: attempt },
    data: { processingStatus: "pending", processingError: message.slice(0, 1000), processingStartedAt: ctx.now() },
  });
  if (count === 0) return { status: "stale" };
  return { status: "retry", delayMs: retryDelayMs(attempt, config.retryBaseMs), error: message };
}

/** Runs every step for a claimed memory (the embedded runner's job). */
export async function processMemory(
  db: Db,
  claim: Claim,
  config: Pick<ProcessingConfig, "maxAttempts" | "retryBaseMs"> & {
    signal?: AbortSignal;
    /** Called once the file's (or link's) text is read and written: the embedded runner gives back its read turn then. */
    onExtracted?: () => void;
  },
): Promise<JobOutcome> {
  // All steps in one go: their writes commit together with `complete` (see StepContext.deferred).
  const ctx: StepContext = { db, memory: claim.memory, now: () => new Date(), deferred: { changes: {} }, attempt: claim.attempt, signal: config.signal };
  let indexed = false;
  try {
    for (const step of PROCESSING_STEPS) {
      // The lease was lost (another process took the memory over): its owner finishes the job, not us.
      if (config.signal?.aborted) return { status: "stale" };
      await step.run(ctx);
      if (step.name === "extract") config.onExtracted?.();
      if (step.name === "complete") indexed = true;
    }
    return { status: "done" };
  } catch (error) {
    // Lost while a step waited (its turn to read a document): the owner now is the new one, not us.
    if (error instanceof StaleJobError || config.signal?.aborted) return { status: "stale" };
    try {
      return await recordFailure(ctx, claim.attempt, error, config, indexed);
    } catch (recordError) {
      // Even this write failed (database gone?): the row stays `running` and the sweeper resumes it later.
      console.error(`[engram] processing: could not record the failure of memory ${claim.memory.id}`, recordError);
      return { status: "retry", delayMs: retryDelayMs(claim.attempt, config.retryBaseMs), error: describeError(error) };
    }
  }
}

/**
 * A provider that refused the request itself (HTTP 4xx: a wrong key, an unknown model, a request it
 * cannot take) answers a retry the same way; retrying only delays the failure by the whole backoff.
 * 408, 409 and 429 say "not now" and are retried like 5xx, timeouts and unreachable providers.
 */
export function isPermanentError(error: unknown): boolean {
  const cause = RetryError.isInstance(error) ? error.lastError : error;
  if (!APICallError.isInstance(cause) || cause.statusCode === undefined) return false;
  return cause.statusCode >= 400 && cause.statusCode < 500 && ![408, 409, 429].includes(cause.statusCode);
}

/**
 * What a failed attempt tells the hub: processing_error (and the owner's notification) is read by every
 * member, so a provider's reply loses what looks like a credential (some echo the key they were sent),
 * and errors from inside the server (database, file system, network) become a plain sentence. The
 * full error goes to the log (recordFailure).
 */
export function describeError(error: unknown): string {
  const cause = RetryError.isInstance(error) ? error.lastError : error;
  if (APICallError.isInstance(cause)) {
    // No status: the request never got an answer; the message names the host and port it tried.
    if (cause.statusCode === undefined) return "The model provider could not be reached";
    return clip(`The model provider answered HTTP ${cause.statusCode}: ${redactSecrets(firstLine(cause.message))}`);
  }
  if (!(cause instanceof Error)) return "Processing failed (the server log has the details)";
  if (cause.name === "TimeoutError" || cause.name === "AbortError") return "The model provider did not answer in time";
  // Database errors carry SQL, table and constraint names; system errors the server's paths and addresses.
  if (/^(PrismaClient|DriverAdapter)/.test(cause.name) || typeof (cause as { syscall?: unknown }).syscall === "string") {
    return "Processing failed (the server log has the details)";
  }
  return clip(redactSecrets(`${cause.name === "Error" ? "" : `${cause.name}: `}${firstLine(cause.message)}`));
}

const firstLine = (text: string) => text.trim().split("\n")[0]!;
const clip = (text: string) => text.slice(0, 1000);

/** API keys (sk-…, and whatever follows "Bearer" or a key= parameter) and absolute file paths. */
function redactSecrets(text: string): string {
  return text
    .replace(/\b(?:sk|rk|pk)-[\w*.-]{4,}/g, "[redacted]")
    .replace(/\b(Bearer\s+)\S+/gi, "$1[redacted]")
    .replace(/\b((?:api[_-]?)?key=)[^\s&]+/gi, "$1[redacted]")
    .replace(/(^|[\s'"(=])(?:\/[\w.@-]+){2,}\/?/g, "$1[path]");
}

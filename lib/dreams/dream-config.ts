import { positiveIntEnv } from "@/lib/config.ts";

/**
 * Dream thresholds and budgets (docs/dreams.md). The similarity thresholds were
 * set on the planted pairs of tests/dreams.test.ts with the local MiniLM model
 * (that is the fitting set); the bench hub is synthetic and only measures time.
 */
export interface DreamConfig {
  /** Near-duplicates: embedding cosine at least this… */
  duplicateCosine: number;
  /** …and content-word Jaccard overlap at least this. */
  duplicateJaccard: number;
  /** Contradictions are looked for between memories at least this similar. */
  contradictionCosine: number;
  /** A pair is only compared when it shares this share of its rarest words. */
  candidateOverlap: number;
  /** Never accessed, not stable, and untouched for this many days → stale. */
  staleDays: number;
  /** At most this many stale memories are archived per run (the rest wait for the next). */
  maxStalePerRun: number;
  /** At most this many merges (each archives a memory) per run, across its attempts (the rest wait for the next). */
  maxMergesPerRun: number;
  /** An unsorted memory joins an existing topic whose centroid is at least this similar. */
  topicCosine: number;
  /** Unsorted memories cluster with a centroid at least this similar… */
  clusterCosine: number;
  /** …and a cluster of at least this many becomes a new topic. */
  minClusterSize: number;
  maxNewTopicsPerRun: number;
  /** Actions written per transaction; progress is saved after each batch. */
  batchSize: number;
  /** Wall-clock budget of one run; a run out of time stops cleanly (partial_failed) and the next continues. */
  maxRunMs: number;
  /** A running run whose heartbeat is older than this is presumed dead and resumed. */
  staleRunMs: number;
  /** Scheduled runs: at most one per hub per this many hours, for hubs with new writes. */
  intervalHours: number;
  /** With a chat model: at most this many model calls (merge rewrites, topic names) per run. */
  maxModelCallsPerRun: number;
  /** The steps a run takes (the hub owner's switches, see dream-settings.ts): off, a step writes nothing. */
  mergeEnabled: boolean;
  archiveEnabled: boolean;
  organizeEnabled: boolean;
  /** Memories of these kinds are left out of the run: never compared, merged, archived or filed. */
  excludedKinds: readonly string[];
}

export function dreamConfig(overrides: Partial<DreamConfig> = {}): DreamConfig {
  return {
    duplicateCosine: 0.9,
    duplicateJaccard: 0.5,
    contradictionCosine: 0.8,
    candidateOverlap: 0.3,
    staleDays: positiveIntEnv("ENGRAM_DREAM_STALE_DAYS", 90),
    maxStalePerRun: positiveIntEnv("ENGRAM_DREAM_MAX_STALE_PER_RUN", 500),
    maxMergesPerRun: positiveIntEnv("ENGRAM_DREAM_MAX_MERGES_PER_RUN", 500),
    topicCosine: 0.5,
    clusterCosine: 0.5,
    minClusterSize: 3,
    maxNewTopicsPerRun: 20,
    batchSize: 200,
    maxRunMs: positiveIntEnv("ENGRAM_DREAM_MAX_SECONDS", 300) * 1000,
    staleRunMs: positiveIntEnv("ENGRAM_DREAM_STALE_SECONDS", 120) * 1000,
    intervalHours: positiveIntEnv("ENGRAM_DREAM_INTERVAL_HOURS", 24),
    maxModelCallsPerRun: positiveIntEnv("ENGRAM_DREAM_MAX_MODEL_CALLS", 100),
    mergeEnabled: true,
    archiveEnabled: true,
    organizeEnabled: true,
    excludedKinds: [],
    ...overrides,
  };
}

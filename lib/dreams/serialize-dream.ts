import type { DreamAction, DreamRun } from "@/lib/db/generated/client.ts";

export interface RunCounts {
  merged: number;
  contradictions: number;
  archived: number;
  organized: number;
  topicsCreated: number;
}

export const ZERO_COUNTS: RunCounts = { merged: 0, contradictions: 0, archived: 0, organized: 0, topicsCreated: 0 };

/** The SDK's DreamRun shape (plus hub_id, triggered_by, phase, topics_created, error). */
export function serializeDreamRun(run: DreamRun, counts: RunCounts) {
  return {
    id: run.id,
    hub_id: run.hubId,
    owner_id: run.triggeredBy ?? undefined,
    triggered_by: run.triggeredBy,
    mode: run.mode,
    status: run.status,
    phase: run.phase,
    // A queued run has not started; clients parse started_at, so it is the time it was queued.
    started_at: (run.startedAt ?? run.createdAt).toISOString(),
    ...(run.finishedAt && { finished_at: run.finishedAt.toISOString() }),
    memories_scanned: run.memoriesScanned,
    duplicates_merged: counts.merged,
    contradictions_found: counts.contradictions,
    memories_archived: counts.archived,
    memories_organized: counts.organized,
    topics_restructured: 0,
    topics_created: counts.topicsCreated,
    phase_metrics: run.phaseMetrics,
    report: run.report,
    error: run.error,
    created_at: run.createdAt.toISOString(),
  };
}

/** The SDK's DreamAction shape plus its undo state. */
export function serializeDreamAction(action: DreamAction) {
  return {
    id: action.id,
    run_id: action.runId,
    hub_id: action.hubId,
    action_type: action.actionType,
    state: action.state,
    source_memory_ids: action.sourceMemoryIds,
    ...(action.resultMemoryId && { result_memory_id: action.resultMemoryId }),
    from_topic_id: action.fromTopicId,
    to_topic_id: action.toTopicId,
    created_topic: action.createdTopic,
    reason: action.reason,
    similarity: action.similarity,
    details: action.details,
    resolution: action.resolution,
    resolved_by: action.resolvedBy,
    resolved_at: action.resolvedAt?.toISOString() ?? null,
    created_at: action.createdAt.toISOString(),
  };
}

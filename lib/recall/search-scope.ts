import { clampInstant } from "@/lib/api/timestamp.ts";

/** Which memories a search may return: always the caller's hubs, always active. */
export interface SearchScope {
  hubIds: string[];
  kind?: string;
  topicId?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  ownerId?: string;
}

type FilterArguments = [string | null, string | null, string | null, string | null, string | null];

/** The optional filters as positional SQL arguments: kind, topic, created after, created before, owner (absent: NULL). */
export function filterArguments(filters: Omit<SearchScope, "hubIds">): FilterArguments {
  return [
    filters.kind ?? null,
    filters.topicId ?? null,
    // Clamped to what timestamptz holds: a query's own words ("3000 years ago") can reach past year 1.
    filters.createdAfter ? clampInstant(filters.createdAfter).toISOString() : null,
    filters.createdBefore ? clampInstant(filters.createdBefore).toISOString() : null,
    filters.ownerId ?? null,
  ];
}

/**
 * The scope as the positional arguments of the search functions
 * (engram_recall_candidates): hub ids, then the filters.
 */
export function scopeArguments(scope: SearchScope): [string[], ...FilterArguments] {
  return [scope.hubIds, ...filterArguments(scope)];
}

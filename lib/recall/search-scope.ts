/** Which memories a search may return: always the caller's hubs, always active. */
export interface SearchScope {
  hubIds: string[];
  kind?: string;
  topicId?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  ownerId?: string;
}

/**
 * The scope as the positional arguments of the search functions
 * (`engram_lexical_search`, `engram_vector_search`): hub ids, kind, topic,
 * created after, created before, owner — absent filters are NULL.
 */
export function scopeArguments(scope: SearchScope): [string[], string | null, string | null, string | null, string | null, string | null] {
  return [
    scope.hubIds,
    scope.kind ?? null,
    scope.topicId ?? null,
    scope.createdAfter?.toISOString() ?? null,
    scope.createdBefore?.toISOString() ?? null,
    scope.ownerId ?? null,
  ];
}

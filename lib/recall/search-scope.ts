/** Which memories a search may return: always the caller's hubs, always active. */
export interface SearchScope {
  hubIds: string[];
  kind?: string;
  topicId?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  ownerId?: string;
}

/** Appends the scope's values to `params` and returns the matching SQL condition over memories `alias`. */
export function searchScope(scope: SearchScope, params: unknown[], alias = "m"): string {
  const param = (value: unknown, cast: string) => {
    params.push(value);
    return `$${params.length}::${cast}`;
  };
  const conditions = [`${alias}.hub_id = ANY(${param(scope.hubIds, "uuid[]")})`, `${alias}.state = 'active'`];
  if (scope.kind) conditions.push(`${alias}.kind = ${param(scope.kind, "text")}`);
  if (scope.topicId) conditions.push(`${alias}.topic_id = ${param(scope.topicId, "uuid")}`);
  if (scope.createdAfter) conditions.push(`${alias}.created_at >= ${param(scope.createdAfter.toISOString(), "timestamptz")}`);
  if (scope.createdBefore) conditions.push(`${alias}.created_at < ${param(scope.createdBefore.toISOString(), "timestamptz")}`);
  if (scope.ownerId) conditions.push(`${alias}.owner_id = ${param(scope.ownerId, "uuid")}`);
  return conditions.join(" AND ");
}

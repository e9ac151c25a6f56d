/** Whether a Prisma/driver error is a unique-constraint violation (Postgres 23505). */
export function isUniqueViolation(error: unknown): boolean {
  if (!error || typeof error !== "object") return false;
  const e = error as { code?: unknown; cause?: unknown; meta?: { driverAdapterError?: { cause?: { code?: unknown; originalCode?: unknown; kind?: unknown } } } };
  if (e.code === "P2002" || e.code === "23505") return true;
  const cause = e.meta?.driverAdapterError?.cause;
  if (cause && (cause.kind === "UniqueConstraintViolation" || cause.originalCode === "23505")) return true;
  return e.cause !== undefined && e.cause !== error ? isUniqueViolation(e.cause) : false;
}

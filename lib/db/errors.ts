/**
 * Whether a Prisma/driver error, or one it wraps, is this PostgreSQL error: by Prisma's code, the
 * SQLSTATE, or the driver adapter's kind.
 */
function isPostgresError(error: unknown, codes: { prisma: string; sqlState: string; kind: string }, depth = 0): boolean {
  if (!error || typeof error !== "object" || depth > 5) return false;
  const e = error as { code?: unknown; cause?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; kind?: unknown } } } };
  if (e.code === codes.prisma || e.code === codes.sqlState) return true;
  const cause = e.meta?.driverAdapterError?.cause;
  if (cause && (cause.kind === codes.kind || cause.originalCode === codes.sqlState)) return true;
  return e.cause !== undefined && e.cause !== error ? isPostgresError(e.cause, codes, depth + 1) : false;
}

/**
 * Whether Prisma found no row for an update or delete that needed one (P2025): a concurrent request
 * deleted it after this one read it.
 */
export function isRecordGone(error: unknown): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === "P2025";
}

/** Whether a Prisma/driver error is a unique-constraint violation (Postgres 23505). */
export function isUniqueViolation(error: unknown): boolean {
  return isPostgresError(error, { prisma: "P2002", sqlState: "23505", kind: "UniqueConstraintViolation" });
}

/**
 * The name of the unique index a violation ran into (or its columns, when the driver gave no name),
 * for the log: Prisma's own message names only the columns, which several indexes may share.
 */
export function violatedConstraint(error: unknown, depth = 0): string | undefined {
  if (!error || typeof error !== "object" || depth > 5) return undefined;
  const e = error as {
    constraint?: unknown;
    cause?: unknown;
    meta?: { target?: unknown; driverAdapterError?: { cause?: { constraint?: { index?: unknown; fields?: unknown }; originalMessage?: unknown } } };
  };
  if (typeof e.constraint === "string") return e.constraint;
  const cause = e.meta?.driverAdapterError?.cause;
  if (typeof cause?.constraint?.index === "string") return cause.constraint.index;
  const named = typeof cause?.originalMessage === "string" ? cause.originalMessage.match(/unique constraint "([^"]+)"/)?.[1] : undefined;
  if (named) return named;
  const fields = cause?.constraint?.fields ?? e.meta?.target;
  const nested = e.cause !== undefined && e.cause !== error ? violatedConstraint(e.cause, depth + 1) : undefined;
  return nested ?? (Array.isArray(fields) ? `(${fields.join(", ")})` : typeof fields === "string" ? fields : undefined);
}

/**
 * Whether a Prisma/driver error is a foreign-key violation (Postgres 23503): a row this write refers to
 * (a hub, a topic, a memory) was deleted by a concurrent request after it was read.
 */
export function isForeignKeyViolation(error: unknown): boolean {
  return isPostgresError(error, { prisma: "P2003", sqlState: "23503", kind: "ForeignKeyConstraintViolation" });
}

/** SQLSTATEs of a lost or refused connection: admin/crash shutdown, cannot connect now, connection exceptions. */
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "08000", "08001", "08003", "08004", "08006"]);
const UNAVAILABLE_PRISMA_CODES = new Set(["P1001", "P1002", "P1017"]);
const UNAVAILABLE_NODE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

/**
 * Whether an error means the database server could not be reached or dropped the connection (a restart,
 * failover, network loss) rather than a fault of the request: the API answers 503, and a retry succeeds
 * once the server is back.
 */
export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!error || typeof error !== "object" || depth > 5) return false;
  const e = error as { code?: unknown; message?: unknown; cause?: unknown; meta?: { driverAdapterError?: { cause?: { kind?: unknown; originalCode?: unknown; code?: unknown } } } };
  if (typeof e.code === "string" && (UNAVAILABLE_PRISMA_CODES.has(e.code) || UNAVAILABLE_SQLSTATES.has(e.code) || UNAVAILABLE_NODE_CODES.has(e.code))) return true;
  const cause = e.meta?.driverAdapterError?.cause;
  if (cause) {
    if (cause.kind === "DatabaseNotReachable" || cause.kind === "ConnectionClosed") return true;
    if (typeof cause.originalCode === "string" && UNAVAILABLE_SQLSTATES.has(cause.originalCode)) return true;
  }
  // node-postgres's own words for a pooled connection the server dropped: at once, or when it is used next.
  if (typeof e.message === "string" && /^Connection terminated|Client has encountered a connection error and is not queryable/.test(e.message)) return true;
  return e.cause !== undefined && e.cause !== error ? isDatabaseUnavailable(e.cause, depth + 1) : false;
}

/**
 * Whether an interactive transaction outlived its time limit (Prisma P2028 with a timeout): the database
 * was too busy to finish it (lock waits, a saturated pool). Nothing was written; the API answers 503.
 */
export function isTransactionExpired(error: unknown): boolean {
  if (!error || typeof error !== "object") return false;
  const e = error as { code?: unknown; meta?: { timeout?: unknown } };
  return e.code === "P2028" && typeof e.meta?.timeout === "number";
}

/** Environment configuration, read once. Every variable is documented in README.md. */
export interface EngramConfig {
  databaseUrl: string | undefined;
  /** Unset when ENGRAM_ADMIN_TOKEN is shorter than MIN_ADMIN_TOKEN_LENGTH: the admin routes stay off. */
  adminToken: string | undefined;
  /** ENGRAM_ADMIN_TOKEN was set but too short to use; start-up warns. */
  adminTokenTooShort: boolean;
  secret: string | undefined;
  publicUrl: string | undefined;
  rateLimits: { regular: number; heavy: number; light: number };
  upstash: { url: string; token: string } | undefined;
}

/** A whole-number setting ≥ 1 from the environment; a bad value stops start-up with a clear message. */
export function positiveIntEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

/**
 * A whole-number setting whose range is not positiveIntEnv's (0 allowed, or an upper bound): its range
 * is the one in RANGED_SETTINGS, so what start-up accepts and what the reader accepts never differ.
 */
export function wholeNumberEnv(name: keyof typeof RANGED_SETTINGS, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const { min, max } = RANGED_SETTINGS[name];
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be ${max === Infinity ? `a whole number from ${min}` : `an integer from ${min} to ${max}`}, got "${raw}"`);
  }
  return value;
}

/** Whole-number settings read through wholeNumberEnv, with the range each accepts. */
const RANGED_SETTINGS = {
  ENGRAM_EMBED_MAX_TOKENS: { min: 32, max: 256 },
  ENGRAM_EMBED_NICE: { min: 0, max: 19 },
  ENGRAM_EMBED_THREADS: { min: 1, max: Infinity },
  ENGRAM_INVITE_RESEND_SECONDS: { min: 0, max: Infinity },
  ENGRAM_RERANK_BUDGET_MS: { min: 1, max: Infinity },
  // Failed password sign-ins before the first lock: a value that is no number must not quietly become the default.
  ENGRAM_SIGNIN_ACCOUNT_FAILURES: { min: 1, max: Infinity },
  ENGRAM_SIGNIN_IP_FAILURES: { min: 1, max: Infinity },
  // Read by scripts/server.mjs (plain JavaScript, before the app is loaded); checked here all the same.
  ENGRAM_SHUTDOWN_GRACE_SECONDS: { min: 0, max: Infinity },
};

/**
 * Every setting positiveIntEnv reads. Most are read only when a request or a job needs them, so a value
 * that is no whole number ("lots") let the server start and then failed what reads it with a 500
 * (ENGRAM_HUB_MAX_MEMBERS: every GET /v1/plans, member adds and invite accepts). Start-up checks them
 * all, and those of RANGED_SETTINGS; tests/start-settings.test.ts keeps these lists in step with the code.
 */
const WHOLE_NUMBER_SETTINGS = [
  "ENGRAM_ASK_MODEL_TIMEOUT_MS",
  "ENGRAM_BACKGROUND_DB_CONNECTIONS",
  "ENGRAM_BACKGROUND_DB_PERCENT",
  "ENGRAM_BLOB_TIMEOUT_MS",
  "ENGRAM_DB_POOL_SIZE",
  "ENGRAM_DREAM_INTERVAL_HOURS",
  "ENGRAM_DREAM_MAX_MERGES_PER_RUN",
  "ENGRAM_DREAM_MAX_MODEL_CALLS",
  "ENGRAM_DREAM_MAX_REVIEWS_PER_RUN",
  "ENGRAM_DREAM_MAX_SECONDS",
  "ENGRAM_DREAM_MAX_STALE_PER_RUN",
  "ENGRAM_DREAM_MODEL_TIMEOUT_MS",
  "ENGRAM_DREAM_STALE_DAYS",
  "ENGRAM_DREAM_STALE_SECONDS",
  "ENGRAM_EVENTS_RETENTION_HOURS",
  "ENGRAM_EXTRACT_DOWNLOAD_MAX_MS",
  "ENGRAM_EXTRACT_MAX_BYTES",
  "ENGRAM_EXTRACT_MEMORY_MB",
  "ENGRAM_EXTRACT_TIMEOUT_MS",
  "ENGRAM_HUB_MAX_MEMBERS",
  "ENGRAM_INVITE_EMAILS_PER_HOUR",
  "ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR",
  "ENGRAM_LEXICAL_INDEX_MAX_CHUNKS",
  "ENGRAM_MAINTENANCE_MINUTES",
  "ENGRAM_MODEL_TIMEOUT_MS",
  "ENGRAM_OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR",
  "ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR",
  "ENGRAM_PROCESSING_CONCURRENCY",
  "ENGRAM_PROCESSING_LEASE_SECONDS",
  "ENGRAM_PROCESSING_MAX_ATTEMPTS",
  "ENGRAM_PROCESSING_RETRY_BASE_MS",
  "ENGRAM_PROCESSING_STALE_SECONDS",
  "ENGRAM_PROCESSING_SWEEP_SECONDS",
  "ENGRAM_PURGE_BATCH",
  "ENGRAM_QUERY_EMBED_TIMEOUT_MS",
  "ENGRAM_RATE_LIMIT_HEAVY",
  "ENGRAM_RATE_LIMIT_LIGHT",
  "ENGRAM_RATE_LIMIT_REGULAR",
  "ENGRAM_UPLOAD_MAX_BYTES",
  "ENGRAM_UPLOAD_MAX_PENDING",
];

/** Stops start-up on a whole-number setting that is none, naming it (see WHOLE_NUMBER_SETTINGS). */
export function assertWholeNumberSettings(): void {
  for (const name of WHOLE_NUMBER_SETTINGS) positiveIntEnv(name, 1);
  for (const name of Object.keys(RANGED_SETTINGS) as (keyof typeof RANGED_SETTINGS)[]) wholeNumberEnv(name, 0);
}

/**
 * The admin token creates users and acts as any of them, and its routes answer anyone who can reach
 * the server: one short enough to guess (a word, a PIN) is refused outright rather than trusted.
 */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

export function loadConfig(): EngramConfig {
  const adminToken = process.env.ENGRAM_ADMIN_TOKEN || undefined;
  const adminTokenTooShort = adminToken !== undefined && adminToken.length < MIN_ADMIN_TOKEN_LENGTH;
  const upstashUrl = process.env.UPSTASH_REDIS_REST_URL;
  const upstashToken = process.env.UPSTASH_REDIS_REST_TOKEN;
  return {
    databaseUrl: process.env.DATABASE_URL || undefined,
    adminToken: adminTokenTooShort ? undefined : adminToken,
    adminTokenTooShort,
    secret: process.env.ENGRAM_SECRET || undefined,
    publicUrl: process.env.ENGRAM_PUBLIC_URL || undefined,
    rateLimits: {
      regular: positiveIntEnv("ENGRAM_RATE_LIMIT_REGULAR", 300),
      heavy: positiveIntEnv("ENGRAM_RATE_LIMIT_HEAVY", 60),
      light: positiveIntEnv("ENGRAM_RATE_LIMIT_LIGHT", 600),
    },
    upstash: upstashUrl && upstashToken ? { url: upstashUrl, token: upstashToken } : undefined,
  };
}

const globalForConfig = globalThis as unknown as { __engramConfig?: EngramConfig };

export function config(): EngramConfig {
  globalForConfig.__engramConfig ??= loadConfig();
  return globalForConfig.__engramConfig;
}

/** Tests change the environment and call this to re-read it. */
export function resetConfig(): void {
  globalForConfig.__engramConfig = undefined;
}

/** Settings that were set but not used, for the operator to see at start-up. */
export function configWarnings(): string[] {
  const warnings: string[] = [];
  if (config().adminTokenTooShort) {
    warnings.push(
      `engram: WARNING — ENGRAM_ADMIN_TOKEN is shorter than ${MIN_ADMIN_TOKEN_LENGTH} characters and is ignored: POST /v1/admin/users and POST /v1/auth/impersonate stay off (404). Use a long random one, e.g. openssl rand -base64 33`,
    );
  }
  return warnings;
}

export const VERSION = "0.1.0";

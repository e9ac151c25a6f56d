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

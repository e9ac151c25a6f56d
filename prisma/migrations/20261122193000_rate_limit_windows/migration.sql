-- Rate-limit counters shared by every server process on one PostgreSQL database (lib/api/postgres-rate-limit.ts):
-- one row per identity, bucket and 60-second window. Counters are disposable, so the table is UNLOGGED (no WAL;
-- emptied by a crash of the database server, which at worst grants a fresh minute).
CREATE UNLOGGED TABLE "rate_limit_windows" (
    "key" TEXT NOT NULL,
    "window_start" BIGINT NOT NULL,
    "count" INTEGER NOT NULL DEFAULT 0,
    "allowed" BOOLEAN NOT NULL DEFAULT true,
    CONSTRAINT "rate_limit_windows_pkey" PRIMARY KEY ("key", "window_start")
);
CREATE INDEX "rate_limit_windows_window_start_idx" ON "rate_limit_windows"("window_start");

-- Failed password sign-ins per account and per address (lib/auth/postgres-throttle-store.ts), shared the same way.
-- Logged: a lock must survive a database restart.
CREATE TABLE "sign_in_throttle" (
    "key" TEXT NOT NULL,
    "failures" INTEGER NOT NULL,
    "until_ms" BIGINT NOT NULL,
    "expires_ms" BIGINT NOT NULL,
    CONSTRAINT "sign_in_throttle_pkey" PRIMARY KEY ("key")
);
CREATE INDEX "sign_in_throttle_expires_ms_idx" ON "sign_in_throttle"("expires_ms");

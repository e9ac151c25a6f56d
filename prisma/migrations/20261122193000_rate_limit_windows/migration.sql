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

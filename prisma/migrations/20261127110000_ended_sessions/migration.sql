-- Sign-out ends the session (a review finding): dashboard sessions are stateless cookies (30 days), so
-- signing out only dropped the browser's copy; a copy taken before (a shared machine, a logging proxy)
-- stayed valid. A sign-out now records the cookie's id until it would have expired anyway.
CREATE TABLE "ended_sessions" (
    "jti" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "ended_sessions_pkey" PRIMARY KEY ("jti")
);
CREATE INDEX "ended_sessions_expires_at_idx" ON "ended_sessions"("expires_at");

-- With Inngest, when a sweep last re-sent a waiting memory's event: the sweeps re-send only what waited a
-- whole stale timeout since its write or its last re-send, not every queued memory on every sweep.
ALTER TABLE "memories" ADD COLUMN "processing_queued_at" TIMESTAMPTZ(3);

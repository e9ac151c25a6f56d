-- Each attempt of an Inngest step that works on a dream run takes the run as its own (a fresh token):
-- a step's retry holds the same lease (the function run's), so a cut attempt's late batch matched the
-- lease as well as the retry's did and was written beside it. Every write of the run checks the token.
ALTER TABLE "dream_runs" ADD COLUMN "attempt_token" TEXT;

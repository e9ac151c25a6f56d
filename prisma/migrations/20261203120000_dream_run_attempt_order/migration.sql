-- Which Inngest step attempt holds the run's attempt_token: the step (its place in the run: the phases,
-- then the finish) and Inngest's attempt number. A take by an attempt of the same step older than the
-- holder's is refused: last-writer-wins, a cut attempt going on after its retry's take took the run back,
-- and the retry's next write found it lost.
ALTER TABLE "dream_runs" ADD COLUMN "attempt_step" INTEGER, ADD COLUMN "attempt_number" INTEGER;

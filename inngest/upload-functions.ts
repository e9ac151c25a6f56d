import { getDatabase } from "@/lib/db/database.ts";
import { SWEEP_BATCH, sweepPartialUploads, sweepUploads } from "@/lib/uploads/sweep-uploads.ts";
import { inngest } from "./client.ts";

/** Batches one cron run may sweep (200 each); the rest waits for the next hour. */
const MAX_BATCHES = 50;

/**
 * Hourly with Inngest (the in-process timer otherwise): uploads no memory
 * attached within 24 hours, and the leftovers of deleted memories and hubs,
 * lose their bytes and then their records; then the embedded store's part
 * files of uploads a crash cut off. Each batch is a step, so a retry
 * resumes after the batches already swept.
 */
export const sweepUploadsFunction = inngest.createFunction(
  { id: "sweep-uploads", name: "Delete unattached uploads", triggers: [{ cron: process.env.ENGRAM_UPLOAD_SWEEP_CRON || "23 * * * *" }], concurrency: { limit: 1 } },
  async ({ step }) => {
    let removed = 0;
    for (let batch = 0; batch < MAX_BATCHES; batch++) {
      const count = await step.run(`sweep-${batch}`, async () => sweepUploads((await getDatabase()).prisma));
      removed += count;
      if (count < SWEEP_BATCH) break;
    }
    await step.run("sweep-partials", () => sweepPartialUploads());
    return { removed };
  },
);

// npm run reembed — re-chunk and re-embed every processed memory with the configured embedding model
// (after changing ENGRAM_EMBEDDINGS_PROVIDER / ENGRAM_EMBEDDING_MODEL, or once `npm run models` made the
// local model available). Uses DATABASE_URL, else the embedded database in ENGRAM_DATA_DIR (./.data):
// stop the server first when using the embedded database, it can only be opened by one process.
import cliProgress from "cli-progress";
import { getDatabase } from "@/lib/db/database.ts";
import { reembedMemories, ReembedStopped, type ReembedResult } from "@/lib/processing/reembed-memories.ts";

const database = await getDatabase();
const bar = new cliProgress.SingleBar(
  { format: "reembed [{bar}] {percentage}% | {value}/{total} memories | {eta_formatted} left" },
  cliProgress.Presets.shades_classic,
);
let started = false;
try {
  const result = await reembedMemories(database.prisma, {
    onProgress(done, total) {
      if (!started) {
        bar.start(total, 0);
        started = true;
      }
      bar.setTotal(total); // recounted when memories finish processing during the run
      bar.update(done);
    },
  });
  if (started) bar.stop();
  console.log(summary(result));
  if (result.failed) process.exitCode = 1;
} catch (error) {
  if (started) bar.stop();
  // A run stopped part-way still re-embedded what it reached: say how much, with why it stopped.
  if (error instanceof ReembedStopped) console.log(summary(error.result));
  console.error(`reembed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
} finally {
  await database.close();
}

function summary(result: ReembedResult): string {
  return (
    `reembed: ${result.reembedded} of ${result.total} memories re-embedded with ${result.embedder}` +
    (result.skipped ? `; ${result.skipped} changed meanwhile and are re-processed by the server` : "") +
    (result.failed ? `; ${result.failed} failed (see the log above) and keep their old chunks` : "")
  );
}

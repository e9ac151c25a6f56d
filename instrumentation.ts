// Runs once when the server starts (Node runtime only): open and migrate the
// database before the first request, then start background work.
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME !== "nodejs") return;
  // Next listens before this has finished (on a fresh data directory the migration takes seconds):
  // scripts/server.mjs waits for it on a SIGTERM, so a stop never exits mid-way through opening or
  // migrating the embedded database.
  const starting = start();
  (globalThis as { __engramStarting?: Promise<void> }).__engramStarting = starting;
  await starting;
}

async function start(): Promise<void> {
  const { startServer } = await import("./lib/system/start-server.ts");
  try {
    await startServer();
  } catch (error) {
    // Another process serves this embedded database: exit instead of listening with no database.
    if (error instanceof Error && error.name === "DataDirInUseError") {
      console.error(`engram: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
  // Background processing (issue 4): embedded runner or Inngest, plus the sweeper that resumes unfinished work.
  await (await import("./lib/processing/start-background-processing.ts")).startBackgroundProcessing();
  // Dreams (issue 15): the in-process worker and daily schedule, unless Inngest runs them.
  await (await import("./lib/dreams/dream-runner.ts")).startDreams();
  // Agent chat: resumes turns a stopped process left, and times out unanswered approvals.
  await (await import("./lib/chat/chat-turn-runner.ts")).startChatTurns();
  // scripts/server.mjs (plain JavaScript, same process) calls this on SIGTERM/SIGINT.
  const { stopServer } = await import("./lib/system/stop-server.ts");
  (globalThis as { __engramStopServer?: typeof stopServer }).__engramStopServer = stopServer;
}

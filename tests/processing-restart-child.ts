// Child process for tests/processing-restart.test.ts (not a test itself):
//   seed <dataDir> <count>   create a user and <count> memories through the HTTP handlers, then exit
//   process <dataDir>        start background processing and report progress as JSON lines until all are done
// <dataDir> is a PGlite data directory or, under `npm run test:postgres`, a postgres:// URL.
import { openDatabase, setDatabase } from "@/lib/db/database.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { startBackgroundProcessing } from "@/lib/processing/start-background-processing.ts";
import { dispatch } from "./support/router.ts";

const [mode, dataDir, countArg] = process.argv.slice(2);
const database = await openDatabase(/^postgres(ql)?:/.test(dataDir!) ? { url: dataDir } : { dataDir: dataDir! });
setDatabase(database);

export function memoryText(i: number): string {
  const sections = ["Context", "Steps", "Rollback", "Monitoring", "Follow-up"].map(
    (name, s) =>
      `## ${name}\n\n` +
      Array.from({ length: 9 }, (_, k) => `Service ${i} ${name.toLowerCase()} note ${s}.${k}: check the queue depth, the error budget and the deploy log before moving on.`).join(" "),
  );
  return `# Runbook ${i}\n\n${sections.join("\n\n")}`;
}

if (mode === "seed") {
  const now = new Date();
  const { extra } = await createUser(database.prisma, { email: "restart@example.test", name: "Restart" }, now, (tx, created) =>
    insertApiKey(tx, created.user.id, "test", now),
  );
  for (let i = 0; i < Number(countArg); i++) {
    const res = await dispatch(
      new Request("http://engram.test/v1/memories", {
        method: "POST",
        headers: { authorization: `Bearer ${extra.key}`, "content-type": "application/json" },
        body: JSON.stringify({ content: memoryText(i) }),
      }),
    );
    if (res.status !== 201) throw new Error(`seed failed: ${res.status} ${await res.text()}`);
  }
  await database.close();
  console.log(JSON.stringify({ seeded: Number(countArg) }));
} else if (mode === "process") {
  await startBackgroundProcessing();
  for (;;) {
    const groups = await database.prisma.memory.groupBy({ by: ["processingStatus"], _count: true });
    const counts = Object.fromEntries(groups.map((g) => [g.processingStatus, g._count]));
    console.log(JSON.stringify(counts));
    if (!counts.pending && !counts.running) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await database.close();
  process.exit(0);
}

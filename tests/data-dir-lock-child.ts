// Child process for tests/data-dir-lock.test.ts (not a test itself): `<dataDir>`, then on stdin one
// command a line: a moment (ms since the epoch) to take the directory's lock at, answered "took",
// "in use" or "failed: …", or "release", answered "released". A taken lock is held until released,
// so this pid is a live owner while the others try.
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { dataDirLock, DataDirInUseError } from "@/lib/db/data-dir-lock.ts";

const [dataDir] = process.argv.slice(2);
let release: (() => void) | undefined;
for await (const line of createInterface({ input: process.stdin })) {
  if (line === "release") {
    release?.();
    release = undefined;
    process.stdout.write("released\n");
    continue;
  }
  const at = Number(line);
  // Spin rather than sleep: timers would spread the children's attempts over milliseconds.
  while (performance.timeOrigin + performance.now() < at);
  try {
    release = dataDirLock(dataDir!);
    process.stdout.write("took\n");
  } catch (error) {
    process.stdout.write(error instanceof DataDirInUseError ? "in use\n" : `failed: ${(error as Error).message}\n`);
  }
}

import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";

/**
 * Takes the embedded database's directory for this process, or throws if another live process
 * has it. Two processes writing one PGlite directory corrupt it, and nothing in PGlite prevents
 * that (a second `npm start` on another port would do it). The lock is a file beside the
 * directory holding the owner's pid: a file left by a process that died (kill -9) is taken over.
 * Returns the release, which only removes a lock this process still owns.
 */
export function dataDirLock(dataDir: string): () => void {
  const file = `${dataDir.replace(/[\\/]+$/, "")}.lock`;
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(file, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 3) throw error;
      const owner = Number(readFileSync(file, "utf8").trim());
      // Our own pid: left by an earlier life of this pid (a container's pid 1 restarted), not a live owner.
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new DataDirInUseError(
          `The embedded database in ${dataDir} is in use by process ${owner}. It serves one process at a time: stop that one first, ` +
            `give this one another ENGRAM_DATA_DIR, or run several processes on PostgreSQL (DATABASE_URL). ` +
            `If that process is not Engram, delete ${file}.`,
        );
      }
      unlinkSync(file);
    }
  }
  return () => {
    try {
      if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
    } catch {
      // Already gone.
    }
  };
}

/** Another live process has the directory: a start-up error no retry can fix. */
export class DataDirInUseError extends Error {
  override name = "DataDirInUseError";
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

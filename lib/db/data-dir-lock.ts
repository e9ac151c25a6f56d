import { randomBytes } from "node:crypto";
import { closeSync, linkSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync, writeSync } from "node:fs";

/**
 * Takes the embedded database's directory for this process, or throws if another live process
 * has it. Two processes writing one PGlite directory corrupt it, and nothing in PGlite prevents
 * that (a second `npm start` on another port would do it). The lock is a file beside the
 * directory holding the owner's pid: a file left by a process that died (kill -9) is taken over.
 * Returns the release, which only removes a lock this process still owns.
 */
export function dataDirLock(dataDir: string): () => void {
  const file = `${dataDir.replace(/[\\/]+$/, "")}.lock`;
  takeLockFile(file, dataDir, 0);
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

/**
 * Creates `file` holding this pid, taking over one a dead process left. Every process that found
 * the dead owner's file used to remove it and create its own, so a slower one removed the lock a
 * faster one had just taken and both went on. Now only the process that creates the takeover file
 * named after that owner (exclusively, so one at a time) removes it, after reading it again; a
 * takeover file whose own taker died is taken over the same way, one level down.
 */
function takeLockFile(file: string, dataDir: string, depth: number): void {
  for (let attempt = 0; ; attempt++) {
    if (createHoldingPid(file)) return;
    if (attempt > 3 || depth > 3) throw new Error(`Could not take ${file}: other processes keep taking and releasing it`);
    const owner = ownerOf(file);
    if (owner === undefined) continue; // released meanwhile
    if (owner.pid !== undefined && owner.pid !== process.pid && alive(owner.pid)) {
      throw new DataDirInUseError(
        `The embedded database in ${dataDir} is in use by process ${owner.pid}. It serves one process at a time: stop that one first, ` +
          `give this one another ENGRAM_DATA_DIR, or run several processes on PostgreSQL (DATABASE_URL). ` +
          `If that process is not Engram, delete ${file}.`,
      );
    }
    // Its owner is dead, or is an earlier life of this pid (a container's pid 1 restarted), or it holds no pid.
    const takeover = `${file}.takeover-${owner.tag}`;
    takeLockFile(takeover, dataDir, depth + 1);
    try {
      if (ownerOf(file)?.tag === owner.tag) rmSync(file, { force: true });
      if (createHoldingPid(file)) return;
    } finally {
      rmSync(takeover, { force: true });
    }
  }
}

/**
 * Creates `file` with this pid in it, or answers false when it exists. Linked from a file already
 * written, so no other process ever reads it empty (and takes an empty file for a dead owner's).
 */
function createHoldingPid(file: string): boolean {
  const written = `${file}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
  writeFileSync(written, String(process.pid), { flag: "wx" });
  try {
    linkSync(written, file);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    // A file system without hard links: an exclusive create, written at once.
    if (code === "EPERM" || code === "ENOTSUP" || code === "ENOSYS") return createExclusive(file);
    throw error;
  } finally {
    rmSync(written, { force: true });
  }
}

function createExclusive(file: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, "wx");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  try {
    writeSync(fd, String(process.pid));
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Who a lock file names (`tag` is its content, or "invalid"), or undefined when there is none. */
function ownerOf(file: string): { pid?: number; tag: string } | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8").trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const pid = Number(text);
  return Number.isInteger(pid) && pid > 0 ? { pid, tag: String(pid) } : { tag: "invalid" };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

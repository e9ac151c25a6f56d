import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { dataDirLock } from "@/lib/db/data-dir-lock.ts";
import { openDatabase } from "@/lib/db/database.ts";

const root = mkdtempSync(path.join(tmpdir(), "engram-lock-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A live process that is not this one (the lock's "other owner"). */
function otherProcess() {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  return { pid: child.pid!, stop: () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGKILL"))) };
}

describe("the embedded database's directory lock", () => {
  it("refuses a directory a live process holds, and takes over one a dead process left", async () => {
    const dir = path.join(root, "a");
    const other = otherProcess();
    writeFileSync(`${dir}.lock`, String(other.pid));
    expect(() => dataDirLock(dir)).toThrow(`The embedded database in ${dir} is in use by process ${other.pid}`);
    expect(readFileSync(`${dir}.lock`, "utf8")).toBe(String(other.pid));
    await other.stop();
    // Its owner died (kill -9 leaves the file): the next start takes it.
    const release = dataDirLock(dir);
    expect(readFileSync(`${dir}.lock`, "utf8")).toBe(String(process.pid));
    release();
    expect(existsSync(`${dir}.lock`)).toBe(false);
  });

  it("takes over a file holding its own pid (an earlier life of the same pid) and releases only its own lock", () => {
    const dir = path.join(root, "b");
    writeFileSync(`${dir}.lock`, String(process.pid));
    const release = dataDirLock(dir);
    writeFileSync(`${dir}.lock`, "999999999");
    release();
    expect(readFileSync(`${dir}.lock`, "utf8")).toBe("999999999");
  });

  it("an open embedded database holds its directory until it is closed", async () => {
    const dir = path.join(root, "c", "pglite");
    const database = await openDatabase({ dataDir: dir });
    expect(readFileSync(`${dir}.lock`, "utf8")).toBe(String(process.pid));
    const other = otherProcess();
    try {
      writeFileSync(`${dir}.lock`, String(other.pid));
      await expect(openDatabase({ dataDir: dir })).rejects.toThrow("is in use by process");
      writeFileSync(`${dir}.lock`, String(process.pid));
    } finally {
      await other.stop();
    }
    await database.close();
    expect(existsSync(`${dir}.lock`)).toBe(false);
  });

  it("a start whose migrations fail closes the database it opened: the next attempt does not open the directory a second time beside it", async () => {
    const dir = path.join(root, "d", "pglite");
    const migrations = path.join(root, "d-migrations");
    mkdirSync(path.join(migrations, "99990101000000_broken"), { recursive: true });
    writeFileSync(path.join(migrations, "99990101000000_broken", "migration.sql"), `SELECT * FROM no_such_table;`);
    process.env.ENGRAM_MIGRATIONS_DIR = migrations;
    try {
      await expect(openDatabase({ dataDir: dir })).rejects.toThrow(/99990101000000_broken failed/);
    } finally {
      delete process.env.ENGRAM_MIGRATIONS_DIR;
    }
    // Released, as by close(): an instance left open would keep writing the directory the retry opens again.
    expect(existsSync(`${dir}.lock`)).toBe(false);
    const database = await openDatabase({ dataDir: dir });
    await database.close();
  });
});

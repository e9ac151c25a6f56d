import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

  it("a takeover whose taker died in the middle of it is taken over too, and leaves nothing behind", async () => {
    const dir = path.join(root, "f");
    const [owner, taker] = [otherProcess(), otherProcess()];
    await Promise.all([owner.stop(), taker.stop()]);
    writeFileSync(`${dir}.lock`, String(owner.pid));
    writeFileSync(`${dir}.lock.takeover-${owner.pid}`, String(taker.pid));
    const release = dataDirLock(dir);
    expect(readFileSync(`${dir}.lock`, "utf8")).toBe(String(process.pid));
    release();
    expect(readdirSync(root).filter((name) => name.startsWith("f."))).toEqual([]);
  });

  it("processes that find the same stale lock at once: exactly one takes the directory over", async () => {
    const dir = path.join(root, "e");
    const children = Array.from({ length: 3 }, () => lockChild(dir));
    try {
      for (let round = 0; round < 100; round++) {
        const dead = otherProcess();
        await dead.stop();
        writeFileSync(`${dir}.lock`, String(dead.pid));
        const at = Date.now() + 20;
        for (const child of children) child.send(String(at));
        const outcomes = await Promise.all(children.map((child) => child.next()));
        expect([...outcomes].sort(), `round ${round}`).toEqual(["in use", "in use", "took"]);
        // And the file names it: no other process removed or replaced it after it was taken.
        expect(readFileSync(`${dir}.lock`, "utf8"), `round ${round}`).toBe(String(children[outcomes.indexOf("took")]!.proc.pid));
        for (const child of children) child.send("release");
        expect(await Promise.all(children.map((child) => child.next()))).toEqual(["released", "released", "released"]);
        expect(existsSync(`${dir}.lock`)).toBe(false);
      }
    } finally {
      await Promise.all(children.map((child) => child.stop()));
    }
  }, 120_000);
});

/** A child (tests/data-dir-lock-child.ts) that takes the lock of `dir` when told; `next()` is its next line. */
function lockChild(dir: string) {
  const proc: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "data-dir-lock-child.ts"), dir], {
    cwd: process.cwd(),
    stdio: ["pipe", "pipe", "inherit"],
  });
  const said: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let buffer = "";
  proc.stdout!.setEncoding("utf8");
  proc.stdout!.on("data", (chunk: string) => {
    buffer += chunk;
    for (let eol = buffer.indexOf("\n"); eol >= 0; eol = buffer.indexOf("\n")) {
      const line = buffer.slice(0, eol);
      buffer = buffer.slice(eol + 1);
      said.push(line);
      waiting.shift()?.(line);
    }
  });
  let read = 0;
  return {
    proc,
    send: (line: string) => proc.stdin!.write(`${line}\n`),
    next: () => (read < said.length ? Promise.resolve(said[read++]!) : new Promise<string>((resolve) => waiting.push((line) => (read++, resolve(line))))),
    stop: () => new Promise<void>((resolve) => (proc.exitCode !== null ? resolve() : (proc.once("exit", () => resolve()), proc.kill("SIGKILL")))),
  };
}

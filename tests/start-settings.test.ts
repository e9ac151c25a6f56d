import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { assertWholeNumberSettings } from "@/lib/config.ts";

const root = path.resolve(import.meta.dirname, "..");

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return name === "generated" ? [] : filesUnder(file);
    return /\.tsx?$/.test(name) ? [file] : [];
  });
}

/** Every whole-number setting the server reads through positiveIntEnv, wherever it is read. */
const wholeNumberSettings = [
  ...new Set(filesUnder(path.join(root, "lib")).flatMap((file) => [...readFileSync(file, "utf8").matchAll(/\bpositiveIntEnv\(\s*["'](ENGRAM_\w+)["']/g)].map((m) => m[1]!))),
].sort();

describe("whole-number settings at start-up", () => {
  it("a member cap that is no number stops start-up, naming it, instead of a server that answers 500 to what reads it (GET /v1/plans)", () => {
    // Read only per request, such a setting let the server start and failed what reads it.
    const dataDir = mkdtempSync(path.join(tmpdir(), "engram-settings-start-"));
    try {
      const script = 'const { startServer } = await import(process.cwd() + "/lib/system/start-server.ts"); await startServer(); console.log("started");';
      const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: root,
        env: { ...process.env, ENGRAM_DATA_DIR: dataDir, DATABASE_URL: "", ENGRAM_HUB_MAX_MEMBERS: "lots" },
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(run.stdout).not.toMatch(/started|database ready/);
      expect(run.status).not.toBe(0);
      expect(run.stderr).toMatch(/ENGRAM_HUB_MAX_MEMBERS must be a positive integer, got "lots"/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 130_000);

  it("start-up checks every whole-number setting the server reads", () => {
    expect(wholeNumberSettings.length).toBeGreaterThan(20);
    const unchecked = wholeNumberSettings.filter((name) => {
      const before = process.env[name];
      process.env[name] = "lots";
      try {
        assertWholeNumberSettings();
        return true;
      } catch (error) {
        return !String(error).includes(name);
      } finally {
        if (before === undefined) delete process.env[name];
        else process.env[name] = before;
      }
    });
    expect(unchecked).toEqual([]);
    expect(() => assertWholeNumberSettings()).not.toThrow();
  });
});

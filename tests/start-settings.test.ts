import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { assertWholeNumberSettings } from "@/lib/config.ts";
import { assertQuotaLimits } from "@/lib/quotas/quota-limits.ts";
import { assertUploadLimit } from "@/lib/uploads/upload-limits.ts";

const root = path.resolve(import.meta.dirname, "..");

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return name === "generated" ? [] : filesUnder(file);
    return /\.tsx?$/.test(name) ? [file] : [];
  });
}

/** Every whole-number setting the server reads through positiveIntEnv or wholeNumberEnv, wherever it is read. */
const wholeNumberSettings = [
  ...new Set(filesUnder(path.join(root, "lib")).flatMap((file) => [...readFileSync(file, "utf8").matchAll(/\b(?:positiveIntEnv|wholeNumberEnv)\(\s*["'](ENGRAM_\w+)["']/g)].map((m) => m[1]!))),
].sort();

/** The server's code and its production entry point (scripts/server.mjs reads settings of its own). */
const serverSources = [...filesUnder(path.join(root, "lib")), path.join(root, "scripts", "server.mjs")];

/** Every ENGRAM_ setting named anywhere in that code, however it is read. */
const everySetting = [...new Set(serverSources.flatMap((file) => [...readFileSync(file, "utf8").matchAll(/\b(ENGRAM_[A-Z0-9_]*[A-Z0-9])\b/g)].map((m) => m[1]!)))].sort();

/** The settings that take no whole number (words, switches, addresses, paths); every other one start-up must check. */
const NOT_WHOLE_NUMBERS = new Set([
  "ENGRAM_ADMIN_TOKEN",
  "ENGRAM_ALLOW_SIGNUP",
  "ENGRAM_BLOB_DIR",
  "ENGRAM_CHAT_MODEL",
  "ENGRAM_DATA_DIR",
  "ENGRAM_DREAMS",
  "ENGRAM_DREAM_SCHEDULE",
  "ENGRAM_EMAIL_CODE_DEV_RETURN",
  "ENGRAM_EMBEDDINGS_PROVIDER",
  "ENGRAM_EMBEDDING_MODEL",
  "ENGRAM_EMBED_WORKER",
  "ENGRAM_LEXICAL_INDEX",
  "ENGRAM_MIGRATIONS_DIR",
  "ENGRAM_MODEL_DIR",
  "ENGRAM_OAUTH_ALLOW_HTTP_METADATA",
  "ENGRAM_PROCESSING",
  "ENGRAM_PUBLIC_URL",
  "ENGRAM_RATE_LIMIT_STORE",
  "ENGRAM_RERANK_API_KEY",
  "ENGRAM_RERANK_MODEL",
  "ENGRAM_RERANK_URL",
  "ENGRAM_S3_ACCESS_KEY_ID",
  "ENGRAM_S3_BUCKET",
  "ENGRAM_S3_ENDPOINT",
  "ENGRAM_S3_FORCE_PATH_STYLE",
  "ENGRAM_S3_REGION",
  "ENGRAM_S3_SECRET_ACCESS_KEY",
  "ENGRAM_SECRET",
  "ENGRAM_TOOLS",
  "ENGRAM_TRUSTED_PROXIES",
  "ENGRAM_VERCEL_BLOB_ACCESS",
]);

/** What start-up checks before it opens the database (lib/system/start-server.ts). */
function startUpChecks(): void {
  assertWholeNumberSettings();
  assertUploadLimit();
  assertQuotaLimits();
}

/** The start-up checks' error with `name` set to `value` (undefined: they passed). */
function startUpErrorWith(name: string, value: string): string | undefined {
  const before = process.env[name];
  process.env[name] = value;
  try {
    startUpChecks();
    return undefined;
  } catch (error) {
    return String(error);
  } finally {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  }
}

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

  it("every whole-number setting the server reads, however it reads it, stops start-up on a value that is none (lots, 1.5, -3)", () => {
    // Read with a silent fallback (ENGRAM_SIGNIN_ACCOUNT_FAILURES=lots was 5 failures), such a setting
    // started the server on a value the operator never chose.
    const numeric = everySetting.filter((name) => !NOT_WHOLE_NUMBERS.has(name));
    expect(numeric.length).toBeGreaterThan(40);
    for (const name of ["ENGRAM_SIGNIN_ACCOUNT_FAILURES", "ENGRAM_SIGNIN_IP_FAILURES", "ENGRAM_EMBED_THREADS", "ENGRAM_RERANK_BUDGET_MS", "ENGRAM_INVITE_RESEND_SECONDS", "ENGRAM_SHUTDOWN_GRACE_SECONDS"]) {
      expect(numeric).toContain(name);
    }
    const unchecked = numeric.flatMap((name) => ["lots", "1.5", "-3"].filter((value) => !startUpErrorWith(name, value)?.includes(name)).map((value) => `${name}=${value}`));
    expect(unchecked).toEqual([]);
    expect(() => startUpChecks()).not.toThrow();
  });

  it("each keeps its range: 0 where it means none (no wait, no grace, normal priority), never for a count of failures", () => {
    for (const name of ["ENGRAM_INVITE_RESEND_SECONDS", "ENGRAM_SHUTDOWN_GRACE_SECONDS", "ENGRAM_EMBED_NICE"]) expect(startUpErrorWith(name, "0")).toBeUndefined();
    for (const name of ["ENGRAM_SIGNIN_ACCOUNT_FAILURES", "ENGRAM_SIGNIN_IP_FAILURES", "ENGRAM_EMBED_THREADS", "ENGRAM_RERANK_BUDGET_MS"]) expect(startUpErrorWith(name, "0")).toContain(name);
    expect(startUpErrorWith("ENGRAM_EMBED_NICE", "20")).toContain("ENGRAM_EMBED_NICE");
    expect(startUpErrorWith("ENGRAM_EMBED_MAX_TOKENS", "31")).toContain("ENGRAM_EMBED_MAX_TOKENS");
    expect(startUpErrorWith("ENGRAM_EMBED_MAX_TOKENS", "128")).toBeUndefined();
    expect(startUpErrorWith("ENGRAM_SIGNIN_ACCOUNT_FAILURES", "3")).toBeUndefined();
  });
});

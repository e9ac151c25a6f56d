import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The environment variables an operator reads about are the ones the code reads, and the other way
 * round: docs/operations.md once named `ENGRAM_EVENTS_RETENTION_DAYS`, which nothing reads (the
 * setting is `ENGRAM_EVENTS_RETENTION_HOURS`), and `npm run models` / the server read variables no
 * page named.
 */
const root = path.resolve(import.meta.dirname, "..");

function filesUnder(dir: string, extensions: RegExp): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return name === "generated" || name === "node_modules" ? [] : filesUnder(file, extensions);
    return extensions.test(name) ? [file] : [];
  });
}

const read = (file: string) => readFileSync(file, "utf8");
const docs = [path.join(root, "README.md"), ...filesUnder(path.join(root, "docs"), /\.md$/)];
/** What the server, its scripts, benchmarks and tests read (a documented test or benchmark knob counts). */
const sources = ["lib", "app", "scripts", "inngest", "bench", "tests"]
  .flatMap((dir) => filesUnder(path.join(root, dir), /\.(ts|tsx|mjs|js)$/))
  .filter((file) => file !== import.meta.filename);
sources.push(...["instrumentation.ts", "next.config.ts", "vitest.config.ts", "vitest.postgres.config.ts", "vitest.compat.config.ts"].map((f) => path.join(root, f)));
/** The server and its operations scripts: what an operator may set. */
const served = ["lib", "app", "scripts", "inngest"].flatMap((dir) => filesUnder(path.join(root, dir), /\.(ts|tsx|mjs)$/));
served.push(path.join(root, "instrumentation.ts"));

describe("documented environment variables", () => {
  it("every ENGRAM_ variable the docs name is read somewhere", () => {
    const code = sources.map(read).join("\n");
    const named = new Set(docs.flatMap((file) => [...read(file).matchAll(/\bENGRAM_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0])));
    const unread = [...named].filter((name) => !code.includes(name)).sort();
    expect(unread).toEqual([]);
  });

  it("every ENGRAM_ variable the server and its scripts read is documented", () => {
    const text = docs.map(read).join("\n");
    const reads = new Set(
      served.flatMap((file) =>
        [...read(file).matchAll(/process\.env\.(ENGRAM_\w+)|process\.env\[["'](ENGRAM_\w+)["']\]|\b(?:positiveIntEnv|envInt|parseQuota)\(\s*["'](ENGRAM_\w+)["']/g)].map(
          (m) => m[1] ?? m[2] ?? m[3]!,
        ),
      ),
    );
    const undocumented = [...reads].filter((name) => !new RegExp(`\\b${name}\\b`).test(text)).sort();
    expect(undocumented).toEqual([]);
  });
});

// Adds up what the CI steps' test runners reported and prints one closing line,
// "N passed, N failed, N skipped", so the run's verdict counts tests and not only the exit code.
// Only that last line has the closing-line shape: the per-step lines are worded differently, so a
// reader that takes any "N passed, N failed" line cannot pick a step's partial (or zero) count.
// Reads the step logs that .ci/run tees into the directory given as the first argument.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

const dir = process.argv[2];
const totals = { passed: 0, failed: 0, skipped: 0 };
const stripAnsi = (text) => text.replace(/\x1b\[[0-9;]*m/g, "");

for (const file of readdirSync(dir).sort()) {
  const text = stripAnsi(readFileSync(path.join(dir, file), "utf8"));
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const line of text.split("\n")) {
    // vitest: " Tests  2 failed | 1617 passed | 10 skipped (1629)"
    const vitest = line.match(/^\s*Tests\s+(.+)\(\d+\)\s*$/);
    if (vitest) {
      for (const [, n, what] of vitest[1].matchAll(/(\d+) (passed|failed|skipped|todo)/g)) {
        counts[what === "todo" ? "skipped" : what] += Number(n);
      }
      continue;
    }
    // Playwright's list reporter: "  3 passed (2.1m)", "  1 failed", "  2 skipped", "  1 flaky"
    const playwright = line.match(/^\s+(\d+) (passed|failed|skipped|flaky)(?: \([\d.]+m?s?\))?\s*$/);
    if (playwright) {
      const what = playwright[2] === "flaky" ? "passed" : playwright[2];
      counts[what] += Number(playwright[1]);
      continue;
    }
    // Schemathesis: "  3587 generated, 3587 passed" / "..., 3580 passed, 7 failed"
    const fuzz = line.match(/^\s*\d+ generated, (.+)$/);
    if (fuzz) {
      for (const [, n, what] of fuzz[1].matchAll(/(\d+) (passed|failed|skipped)/g)) counts[what] += Number(n);
      continue;
    }
    // bench:faults: one verdict per database, "PASS  pglite: 0 lost …" / "FAIL  postgres: …"
    const campaign = line.match(/^(PASS|FAIL)  \w+: /);
    if (campaign) counts[campaign[1] === "PASS" ? "passed" : "failed"] += 1;
  }
  console.log(`[ci] ${file}: passed ${counts.passed}, failed ${counts.failed}, skipped ${counts.skipped}`);
  for (const key of Object.keys(totals)) totals[key] += counts[key];
}

console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (totals.passed === 0) {
  console.error("[ci] no test ran");
  process.exit(1);
}

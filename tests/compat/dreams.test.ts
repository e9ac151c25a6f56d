import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, memax, pushProcessed, scratchHome, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// `memax dreams trigger|list|report` against the built server: memories pushed through the API
// are embedded by the server's own background runner, and the run is done by its in-process worker.
describe("memax dreams", () => {
  let engram: Engram;
  let ann: EngramUser;
  const home = scratchHome();
  const run = async (...args: string[]) => {
    const result = await memax(engram, ["dreams", ...args], { key: ann.key, home });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    return result.stdout;
  };

  beforeAll(async () => {
    engram = await startEngram();
    ann = await engram.user("Ann");
    const contents = [
      "Use pnpm, not npm, for installing dependencies in the web repo.",
      "In the web repo we install dependencies with pnpm instead of npm.",
      "The API request timeout is 30 seconds.",
      "The API request timeout is 60 seconds.",
      "Rotate the Stripe key every 90 days.",
      "Rotate the Twilio key every 90 days.",
    ];
    await pushProcessed(ann, contents);
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("reports no runs, then triggers one, lists it and shows its report", async () => {
    expect(await run("list")).toMatch(/No dream runs yet for this hub/);
    expect(await run("report")).toMatch(/No dream runs yet for this hub/);
    expect(await run("trigger")).toMatch(/Dream cycle queued\./);
    const [first] = (await ann.api("GET", "/v1/dreams")).body.data.runs;
    const finished = await eventually(async () => {
      const list = JSON.parse(await run("list", "--format", "json"));
      return list.runs.find((r: { id: string; status: string }) => r.id === first.id && r.status === "completed");
    }, 120_000, "dream run completed");
    expect(finished).toMatchObject({ duplicates_merged: 1, contradictions_found: 1, memories_scanned: 6 });
    const text = await run("list");
    expect(text).toMatch(/\[completed\]/);
    expect(text).toMatch(/result: 1 merged, 1 contradictions/);
    expect(text).toMatch(/report: Merged 1 near-duplicate, flagged 1 contradiction for review/);
    const report = await run("report");
    expect(report).toMatch(/pending review: 1 contradictions/);
    expect(report).toMatch(/# Dream report/);
    expect(report).toMatch(/• merge: /);
    expect(report).toMatch(/• contradiction: /);
    const json = JSON.parse(await run("report", "--format", "json"));
    expect(json).toMatchObject({ has_run: true, intelligence: { latest_run: { merged: 1, contradictions_found: 1 }, pending_review: { contradictions: 1 } } });
  });
});

import { describe, expect, it } from "vitest";
import { classifyKind } from "@/lib/processing/classify-heuristic.ts";
import { inferContentType } from "@/lib/processing/infer-content-type.ts";

/** The fastest of five runs: a busy machine would have to stall every one of them to fail the bound. */
const timed = <T>(f: () => T) => {
  let best = Infinity;
  let result!: T;
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    result = f();
    best = Math.min(best, performance.now() - started);
  }
  return { result, ms: best };
};

describe("create-time heuristics on their 20,000-character sample (ReDoS)", () => {
  // Both run inline on every push. Their ^\s* (flag m) rescanned a run of blank lines from each of
  // its lines and [^\]]+ scanned to the end from every [: 200-400 ms per call on this sample, now ~1 ms.
  const blank = `Notes\n${"\n".repeat(20_000)}x`;
  const brackets = "[[".repeat(10_000);

  it("classifyKind counts steps and commands in linear time, with the same kinds", () => {
    const run = timed(() => classifyKind(blank, "text"));
    expect(run.ms).toBeLessThan(100);
    expect(run.result).toBe("semantic");
    expect(classifyKind("How to deploy:\n\n1. Build\n2) Test\n\n\nstep 3 ship\n  $ npm ci\ngit push\n", "text")).toBe("procedural");
    expect(classifyKind("We decided on Postgres because of its JSON support.", "text")).toBe("rationale");
  });

  it("inferContentType finds list items and links in linear time, with the same types", () => {
    for (const sample of [blank, brackets]) {
      const run = timed(() => inferContentType(sample));
      expect(run.ms).toBeLessThan(100);
      expect(run.result).toBe("text");
    }
    expect(inferContentType("Shopping\n\n\n  - milk\n- eggs")).toBe("markdown");
    expect(inferContentType("See [the docs](https://example.com) first.")).toBe("markdown");
    expect(inferContentType("Empty [link]() and [](x) and [a] (b) stay text.")).toBe("text");
  });
});
